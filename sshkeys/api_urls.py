"""REST API routes of the sshkeys app (mounted under /api/v1/)."""

from django.urls import path

from sshkeys import api

urlpatterns = [
    path("ssh-keys/", api.SSHKeyListView.as_view(), name="api-ssh-keys"),
    path("ssh-keys/<int:pk>/", api.SSHKeyDetailView.as_view(), name="api-ssh-key"),
]
