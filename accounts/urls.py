"""Account pages (API tokens and experiment-tracking credentials are managed here by each user)."""

from django.urls import path

from accounts import views

app_name = "accounts"
urlpatterns = [
    path("tokens/", views.tokens, name="tokens"),
    path("tracking/", views.tracking, name="tracking"),
]
