"""REST API routes of the accounts app (mounted under /api/v1/)."""

from django.urls import path

from accounts import api

urlpatterns = [
    path("tokens/", api.TokenListView.as_view(), name="api-tokens"),
    path("tokens/<int:pk>/", api.TokenDetailView.as_view(), name="api-token"),
    path("audit/", api.AuditListView.as_view(), name="api-audit"),
]
