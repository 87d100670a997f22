"""A kubeconfig is decrypted once per cluster per process; a credential rotation is used at once.

Uncached, one Diagnosis tab cost 4,020 kubeconfig decryptions: every load of a Cluster row ran Fernet.
Here 200 loads of one cluster (as a 200-Worker job's Tasks load it) decrypt once, and after the back office
stores a rotated credential (the old token revoked on the API server) the next load talks with the new one.
"""

from __future__ import annotations

import pytest
import yaml

from clusters.models import Cluster
from clusters.runtime.base import RuntimeFailure
from clusters.runtime.kubernetes import KubernetesRuntime
from rlark_console import crypto
from tests.fake_k8s.fixtures import MARKER_TOKEN, fake_k8s  # noqa: F401

pytestmark = pytest.mark.django_db


def decryptions() -> int:
    return crypto._decrypt_token.cache_info().misses


def test_kubeconfig_decrypted_once_and_rotation_takes_effect(fake_k8s, settings):  # noqa: F811
    settings.RLARK_K8S_CONNECT_TIMEOUT = 1
    settings.RLARK_K8S_READ_TIMEOUT = 2
    crypto._decrypt_token.cache_clear()
    Cluster.objects.create(
        name="gpu-a", runtime="kubernetes", namespace="rlark-system", kubeconfig=yaml.safe_dump(fake_k8s.kubeconfig())
    )
    before = decryptions()
    loads = [Cluster.objects.get(name="gpu-a") for _ in range(200)]
    assert decryptions() - before == 1
    assert all(MARKER_TOKEN in c.kubeconfig for c in loads)
    KubernetesRuntime(loads[-1]).ping()

    # rotation: the API server now accepts only the new token; the back office stores the new kubeconfig
    fake_k8s.token = "rotated-token-5e21"
    with pytest.raises(RuntimeFailure) as exc:
        KubernetesRuntime(Cluster.objects.get(name="gpu-a")).ping()
    assert exc.value.reason == "unauthorized"
    cluster = Cluster.objects.get(name="gpu-a")
    cluster.kubeconfig = yaml.safe_dump(fake_k8s.kubeconfig(token="rotated-token-5e21"))
    cluster.save()

    before = decryptions()
    fresh = Cluster.objects.get(name="gpu-a")
    assert "rotated-token-5e21" in fresh.kubeconfig and MARKER_TOKEN not in fresh.kubeconfig
    KubernetesRuntime(fresh).ping()  # the new credential, straight away
    [Cluster.objects.get(name="gpu-a") for _ in range(50)]
    assert decryptions() - before == 1


def test_a_changed_encryption_key_is_not_served_from_the_cache(settings):
    crypto._decrypt_token.cache_clear()
    stored = crypto.encrypt("secret-1")
    assert crypto.decrypt(stored) == "secret-1"
    settings.RLARK_ENCRYPTION_KEY = "another-key"
    with pytest.raises(ValueError, match="cannot decrypt"):
        crypto.decrypt(stored)
