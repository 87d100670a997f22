"""A kubeconfig with a literal token is applied once, not before every request; one whose token can change
(an exec plugin) is still refreshed by the library before each call (clusters/runtime/kubernetes/client.py)."""

from __future__ import annotations

import copy
from types import SimpleNamespace

from kubernetes import client as k8s

from clusters.runtime.kubernetes.client import build_api_client
from tests.fake_k8s.fixtures import MARKER_TOKEN, fake_k8s, fake_kubeconfig  # noqa: F401


def _cluster(kubeconfig: dict) -> SimpleNamespace:
    import yaml

    return SimpleNamespace(pk=None, name="c", in_cluster=False, kubeconfig=yaml.safe_dump(kubeconfig))


def test_a_static_token_is_set_once_and_every_request_still_carries_it(fake_k8s, fake_kubeconfig):  # noqa: F811
    api = build_api_client(_cluster(fake_kubeconfig))
    assert api.configuration.refresh_api_key_hook is None
    core = k8s.CoreV1Api(api)
    for _ in range(3):  # the fake answers 401 to a request without the bearer token
        assert core.list_namespaced_pod("rlark-system").items == []
    assert api.configuration.api_key["BearerToken"].endswith(MARKER_TOKEN)


def test_a_token_that_can_change_is_still_refreshed_before_each_request(fake_kubeconfig):  # noqa: F811
    data = copy.deepcopy(fake_kubeconfig)
    user = data["users"][0]["user"]
    user["exec"] = {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/true"}
    assert build_api_client(_cluster(data)).configuration.refresh_api_key_hook is not None
