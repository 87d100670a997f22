"""Login (rate limited) and the Overview page."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.translation import gettext as _

from accounts import audit, ratelimit
from accounts.services import overview_context


class RateLimitedLoginView(auth_views.LoginView):
    """Django's login view with per-address/username throttling and audit of logins."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):  # noqa: D102
        username = request.POST.get("username", "")
        addr = request.META.get("REMOTE_ADDR", "")
        if ratelimit.is_locked(addr, username):
            form = self.get_form()
            form.add_error(None, _("Too many failed logins. Try again in a few minutes."))
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):  # noqa: D102
        ratelimit.reset(self.request.META.get("REMOTE_ADDR", ""), form.get_user().get_username())
        response = super().form_valid(form)
        audit.record(form.get_user(), "login", "user", form.get_user().pk, request=self.request)
        return response

    def form_invalid(self, form):  # noqa: D102
        ratelimit.record_failure(self.request.META.get("REMOTE_ADDR", ""), self.request.POST.get("username", ""))
        return super().form_invalid(form)


@login_required
def overview(request):
    """The landing page: clusters with node counts and health, the user's jobs by phase."""
    return render(request, "overview.html", overview_context(request.user))
