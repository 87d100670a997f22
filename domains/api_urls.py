"""REST API routes of the domains app (mounted under /api/v1/)."""

from django.urls import path

from domains import api

urlpatterns = [
    path("domains/", api.DomainListView.as_view(), name="api-domains"),
    path("domains/<str:name>/", api.DomainDetailView.as_view(), name="api-domain"),
]
