"""OpenAPI shapes of the clusters API (documentation; the views return ``clusters.services.nodes`` dicts)."""

from __future__ import annotations

from rest_framework import serializers


class CountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    online = serializers.IntegerField(required=False)
    cordoned = serializers.IntegerField(required=False)


class AmountSerializer(serializers.Serializer):
    total = serializers.FloatField()
    free = serializers.FloatField()


class ClusterSerializer(serializers.Serializer):
    """A cluster. Never contains the kubeconfig (only ``has_kubeconfig``)."""

    name = serializers.CharField()
    runtime = serializers.ChoiceField(choices=["kubernetes", "local"])
    status = serializers.ChoiceField(choices=["online", "offline", "degraded"])
    status_message = serializers.CharField()
    namespace = serializers.CharField()
    in_cluster = serializers.BooleanField()
    has_kubeconfig = serializers.BooleanField()
    pod_cidr = serializers.CharField()
    service_cidr = serializers.CharField()
    allow_host_path = serializers.BooleanField()
    isolated_network = serializers.BooleanField()
    last_sync_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    location = serializers.CharField()
    contact = serializers.CharField()
    description = serializers.CharField()
    last_error = serializers.CharField()
    last_error_at = serializers.DateTimeField(allow_null=True)
    offline_since = serializers.DateTimeField(allow_null=True)
    nodes = CountsSerializer()
    gpus = AmountSerializer()


class NodeSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    name = serializers.CharField()
    labels = serializers.DictField(child=serializers.CharField())
    category = serializers.CharField()
    gpu_model = serializers.CharField()
    gpu_key = serializers.CharField()
    gpus = AmountSerializer()
    devices = serializers.DictField()
    cpu = AmountSerializer()
    memory = AmountSerializer()
    online = serializers.BooleanField()
    cordoned = serializers.BooleanField()
    schedulable = serializers.BooleanField()
    control_plane = serializers.BooleanField()
    last_seen = serializers.DateTimeField(allow_null=True)


class ClusterDetailSerializer(ClusterSerializer):
    node_list = NodeSerializer(many=True)


class ClusterRegisterSerializer(serializers.Serializer):
    """``runtime: kubernetes`` needs ``kubeconfig`` (YAML text, mapping or uploaded file) or ``in_cluster``;
    ``runtime: local`` takes ``nodes: [{name, labels, capacity}]``."""

    name = serializers.CharField()
    runtime = serializers.ChoiceField(choices=["kubernetes", "local"])
    kubeconfig = serializers.CharField(required=False, write_only=True)
    in_cluster = serializers.BooleanField(required=False)
    namespace = serializers.CharField(required=False)
    pod_cidr = serializers.CharField(required=False)
    service_cidr = serializers.CharField(required=False)
    allow_host_path = serializers.BooleanField(required=False)
    isolated_network = serializers.BooleanField(required=False, help_text="local clusters only; needs root")
    nodes = serializers.ListField(child=serializers.DictField(), required=False)


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    field = serializers.CharField(required=False)
    detail = serializers.CharField()


class ClusterCountSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    count = serializers.IntegerField()
    schedulable = serializers.IntegerField()


class NodeMatchSerializer(serializers.Serializer):
    selector = serializers.DictField(child=serializers.CharField())
    count = serializers.IntegerField()
    schedulable = serializers.IntegerField()
    clusters = ClusterCountSerializer(many=True)
    nodes = NodeSerializer(many=True)


class SyncResultSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    error = serializers.CharField()
    cluster = ClusterSerializer()
