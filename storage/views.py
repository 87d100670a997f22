"""Storage page for users: the storage classes of each cluster (no secrets) and where hostPath is allowed."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from clusters.models import Cluster
from storage import services


@login_required
def storage_list(request):
    """Clusters with their storage classes (name, kind, description, endpoint/bucket or StorageClass)."""
    rows = []
    for cluster in Cluster.objects.all():
        classes = [{"sc": sc, "params": services.public_parameters(sc)} for sc in services.classes_for_cluster(cluster)]
        rows.append({"cluster": cluster, "classes": classes})
    return render(request, "storage/list.html", {"rows": rows})
