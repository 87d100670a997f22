"""REST API routes of the clusters app (mounted under /api/v1/)."""

from django.urls import path

from clusters.api import views

urlpatterns = [
    path("clusters/", views.ClusterListView.as_view(), name="api-clusters"),
    path("clusters/<str:name>/", views.ClusterDetailView.as_view(), name="api-cluster"),
    path("clusters/<str:name>/sync/", views.ClusterSyncView.as_view(), name="api-cluster-sync"),
    path("clusters/<str:name>/credentials/", views.ClusterCredentialsView.as_view(), name="api-cluster-credentials"),
    path("nodes/", views.NodeListView.as_view(), name="api-nodes"),
    path("nodes/<str:cluster>/<str:name>/cordon/", views.NodeCordonView.as_view(), name="api-node-cordon"),
    path(
        "nodes/<str:cluster>/<str:name>/uncordon/",
        views.NodeUncordonView.as_view(),
        name="api-node-uncordon",
    ),
]
