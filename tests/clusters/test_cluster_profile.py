"""A cluster's location, contact and description, its health history (last sync, last error, offline periods)
and what it has (namespaces, StorageClasses, pulled images) in the back office and the API."""

from __future__ import annotations

import pytest

from clusters.models import Cluster, ClusterOutage
from clusters.runtime.base import NodeInfo
from clusters.services import node_sync

pytestmark = pytest.mark.django_db


def test_offline_periods_last_error_and_images(client, admin_user):
    from storage.models import StorageClass

    cluster = Cluster.objects.create(
        name="sz", runtime="kubernetes", status="online", location="深圳 B2", contact="ops@example.com"
    )
    StorageClass.objects.create(cluster=cluster, name="ckpt", provider="kubernetes", description="checkpoints")
    node = NodeInfo(name="n0", labels={}, capacity={"nvidia.com/gpu": 8}, images=("rlinf/rlinf:0.4", "busybox:1.36"))
    node_sync.apply_node_infos(cluster, [node])
    node_sync.mark_offline(cluster, "cannot reach the Kubernetes API server")
    node_sync.mark_offline(cluster, "cannot reach the Kubernetes API server")  # still the same outage
    cluster.refresh_from_db()
    assert cluster.offline_since is not None and cluster.last_error.startswith("cannot reach")
    client.force_login(admin_user)
    page = client.get(f"/admin/clusters/cluster/{cluster.pk}/change/").content.decode()
    assert "深圳 B2" in page and "ops@example.com" in page and "进行中" in page  # ongoing outage
    node_sync.apply_node_infos(cluster, [node])
    cluster.refresh_from_db()
    (outage,) = ClusterOutage.objects.filter(cluster=cluster)
    assert outage.reason.startswith("cannot reach") and cluster.offline_since is None
    assert cluster.last_error.startswith("cannot reach")  # the last error stays visible after recovery
    page = client.get(f"/admin/clusters/cluster/{cluster.pk}/change/").content.decode()
    assert "rlinf/rlinf:0.4" in page
    # a cluster without credentials cannot be read: a sentence, not the console's records posing as the cluster's
    assert 'class="errornote rl-contents-error"' in page and "ckpt" not in page
    body = client.get("/api/v1/clusters/sz/").json()
    assert body["location"] == "深圳 B2" and body["last_error"].startswith("cannot reach")
    assert body["offline_since"] is None
