"""REST API routes of the accounts app (mounted under /api/v1/)."""

from django.urls import path

from accounts import api, tracking_api

urlpatterns = [
    path("tokens/", api.TokenListView.as_view(), name="api-tokens"),
    path("tokens/<int:pk>/", api.TokenDetailView.as_view(), name="api-token"),
    path("tracking-credentials/", tracking_api.TrackingCredentialListView.as_view(), name="api-tracking-credentials"),
    path(
        "tracking-credentials/<str:name>/",
        tracking_api.TrackingCredentialDetailView.as_view(),
        name="api-tracking-credential",
    ),
    path("audit/", api.AuditListView.as_view(), name="api-audit"),
]
