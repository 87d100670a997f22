"""Account pages (API tokens are managed here by each user)."""

from django.urls import path

from accounts import views

app_name = "accounts"
urlpatterns = [path("tokens/", views.tokens, name="tokens")]
