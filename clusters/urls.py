"""Pages of the clusters app."""

from django.urls import path

from clusters import views

app_name = "clusters"
urlpatterns = [
    path("", views.clusters_page, name="index"),
    path("match/", views.match_box, name="match"),
    path("nodes/<str:cluster>/<str:name>/cordon/", views.node_cordon, {"cordon": True}, name="cordon"),
    path("nodes/<str:cluster>/<str:name>/uncordon/", views.node_cordon, {"cordon": False}, name="uncordon"),
]
