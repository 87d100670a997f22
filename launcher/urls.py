"""Top-level URL configuration."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.utils.translation import gettext_lazy
from django.views.generic.base import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from accounts import views as account_views
from jobs.web import overview as overview_views
from notifications import views as notification_views

admin.site.site_header = "RLark Console"
admin.site.site_title = "RLark Console"
admin.site.index_title = gettext_lazy("Back office")  # translated in accounts/locale

api_v1 = [
    path("", include("jobs.api_urls")),
    path("", include("clusters.api_urls")),
    path("", include("storage.api_urls")),
    path("", include("sshkeys.api_urls")),
    path("", include("domains.api_urls")),
    path("", include("accounts.api_urls")),
    path("", include("terminal.api_urls")),
    path("", include("sshgate.api_urls")),
    path("", include("notifications.api_urls")),
]

urlpatterns = [
    path("", overview_views.overview, name="overview"),
    # browsers (and the admin pages, which have no icon link) ask for /favicon.ico: no 404 on every page
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("login/", account_views.RateLimitedLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include(api_v1)),
    # the job's Notifications tab: before the jobs app's "<name>/<action>/"
    path("jobs/<str:name>/notifications/", notification_views.job_page, name="notifications-job"),
    path("jobs/", include("jobs.web.urls")),
    path("log-archives/", include("jobs.web.archive_urls")),
    path("clusters/", include("clusters.urls")),
    path("storage/", include("storage.urls")),
    path("ssh-keys/", include("sshkeys.urls")),
    path("domains/", include("domains.urls")),
    path("terminal/", include("terminal.urls")),
    path("account/notifications/", include("notifications.urls")),
    path("account/", include("accounts.urls")),
]
