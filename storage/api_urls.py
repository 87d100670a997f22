"""REST API routes of the storage app (mounted under /api/v1/)."""

from django.urls import path

from storage import api

urlpatterns = [
    path("storage-classes/", api.StorageClassListView.as_view(), name="api-storage-classes"),
    path("storage-classes/<int:pk>/", api.StorageClassDetailView.as_view(), name="api-storage-class"),
    path("image-registries/", api.RegistryListView.as_view(), name="api-image-registries"),
    path("image-registries/check/", api.RegistryCheckView.as_view(), name="api-image-registry-check"),
    path("image-registries/<str:name>/", api.RegistryDetailView.as_view(), name="api-image-registry"),
]
