"""pytest fixtures for the fake Kubernetes API server. Import them into a test module:

from tests.fake_k8s.fixtures import fake_k8s, fake_kubeconfig  # noqa: F401
"""

from __future__ import annotations

import pytest

from tests.fake_k8s.server import FakeKubernetes

MARKER_TOKEN = "kubeconfig-marker-7f3c91d2e8"


@pytest.fixture
def fake_k8s():
    """A fresh fake API server on a free 127.0.0.1 port with namespace ``rlark-system``.

    Its bearer token is :data:`MARKER_TOKEN`, a string tests grep for to prove the kubeconfig never leaks."""
    server = FakeKubernetes(token=MARKER_TOKEN).start()
    yield server
    server.stop()


@pytest.fixture
def fake_kubeconfig(fake_k8s) -> dict:
    """A kubeconfig dict pointing at :func:`fake_k8s`."""
    return fake_k8s.kubeconfig()
