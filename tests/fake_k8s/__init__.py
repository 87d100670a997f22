"""A stateful fake Kubernetes API server for tests (see :mod:`tests.fake_k8s.server`)."""

from tests.fake_k8s.server import FakeKubernetes, field_match, label_match

__all__ = ["FakeKubernetes", "field_match", "label_match"]
