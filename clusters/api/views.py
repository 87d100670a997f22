"""``/api/v1/clusters/`` and ``/api/v1/nodes/``.

- ``GET clusters/`` (any logged-in user): ``[cluster_summary]`` - never the kubeconfig.
- ``POST clusters/`` (admin): register (``clusters.services.registration.register_cluster``); 201 with the
  summary, 400 ``{"code", "field", "detail"}`` (e.g. the connectivity test's reason).
- ``GET clusters/<name>/``: summary plus ``node_list``. ``POST clusters/<name>/sync/`` (admin): sync now.
- ``GET nodes/?selector=k=v,k2=v2[&cluster=&category=&gpu_model=&label=&system=1]``: the global match view the
  wizard uses:
  ``{"selector", "count", "schedulable", "clusters": [{cluster, count, schedulable}], "nodes": [...]}``; without
  a selector every node (filters applied) with the same shape. System (control-plane) nodes are left out unless
  a staff user asks ``system=1``; a selector never matches them. 400 ``{"code", "detail"}`` for a bad selector.
- ``POST clusters/<name>/credentials/`` (admin): rotate the kubeconfig or token (tested first, old kept on failure).
- ``POST nodes/<cluster>/<node>/cordon/`` and ``.../uncordon/`` (admin).
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.api.serializers import (
    ClusterDetailSerializer,
    ClusterRegisterSerializer,
    ClusterSerializer,
    ErrorSerializer,
    NodeMatchSerializer,
    NodeSerializer,
    SyncResultSerializer,
)
from clusters.models import Cluster, Node
from clusters.runtime.base import RuntimeFailure
from clusters.selectors import SelectorError
from clusters.services import node_sync
from clusters.services.nodes import cluster_summary, filter_nodes, match_nodes, node_summary
from clusters.services.registration import RegistrationError, register_cluster, set_cordon
from clusters.services.rotation import rotate_credentials
from clusters.system_nodes import show_system_nodes
from rlark_console import apierrors
from rlark_console.jsonbody import flat_fields


class AdminForWrites(IsAuthenticated):
    """Reads for every logged-in user; writes for staff only."""

    def has_permission(self, request, view):
        if not super().has_permission(request, view):
            return False
        return request.method in ("GET", "HEAD", "OPTIONS") or bool(request.user.is_staff)


def _clusters_with_nodes():
    return Cluster.objects.prefetch_related("nodes").all()


class ClusterListView(APIView):
    permission_classes = [AdminForWrites]

    @extend_schema(operation_id="clusters_list", responses={200: ClusterSerializer(many=True)})
    def get(self, request):
        return Response([cluster_summary(c, list(c.nodes.all())) for c in _clusters_with_nodes()])

    @extend_schema(
        operation_id="clusters_create",
        request=ClusterRegisterSerializer,
        responses={201: ClusterSerializer, 400: ErrorSerializer},
    )
    def post(self, request):
        data = flat_fields(request.data, keep=("nodes", "kubeconfig"))
        upload = request.FILES.get("kubeconfig") if hasattr(request, "FILES") else None
        if upload is not None:
            data = {**data, "kubeconfig": upload.read().decode("utf-8", "replace")}
        try:
            cluster = register_cluster(dict(data), actor=request.user, request=request)
        except RegistrationError as exc:
            return Response(
                {"code": exc.code, "field": exc.field, "detail": exc.message}, status=status.HTTP_400_BAD_REQUEST
            )
        if cluster.runtime == Cluster.Runtime.KUBERNETES:
            node_sync.sync_cluster_nodes(cluster, force=True)
            cluster.refresh_from_db()
        return Response(cluster_summary(cluster), status=status.HTTP_201_CREATED)


class ClusterDetailView(APIView):
    permission_classes = [AdminForWrites]

    @extend_schema(operation_id="clusters_retrieve", responses={200: ClusterDetailSerializer})
    def get(self, request, name):
        cluster = get_object_or_404(_clusters_with_nodes(), name=name)
        nodes = list(cluster.nodes.all())
        shown = filter_nodes(nodes, system=show_system_nodes(request.user, request.query_params))
        return Response({**cluster_summary(cluster, nodes), "node_list": [node_summary(n) for n in shown]})


class ClusterSyncView(APIView):
    permission_classes = [IsAdminUser]

    @extend_schema(operation_id="clusters_sync", request=None, responses={200: SyncResultSerializer})
    def post(self, request, name):
        cluster = get_object_or_404(Cluster, name=name)
        result = node_sync.sync_cluster_nodes(cluster, force=True)
        cluster.refresh_from_db()
        return Response({"ok": result.ok, "error": result.error, "cluster": cluster_summary(cluster)})


class ClusterCredentialsView(APIView):
    """``POST clusters/<name>/credentials/`` (admin) ``{"kubeconfig": ...}`` or ``{"token": ...}``: rotate without
    downtime (``clusters.services.rotation``); 200 with the summary, 400 ``{"code", "field", "detail"}`` when the
    new credential fails the registration check (the old one stays in use)."""

    permission_classes = [IsAdminUser]

    @extend_schema(
        operation_id="clusters_rotate_credentials",
        request=None,
        responses={200: ClusterSerializer, 400: ErrorSerializer},
    )
    def post(self, request, name):
        cluster = get_object_or_404(Cluster, name=name)
        data = flat_fields(request.data, keep=("kubeconfig",))
        try:
            rotate_credentials(
                cluster, kubeconfig=data.get("kubeconfig"), token=data.get("token"), actor=request.user, request=request
            )
        except RegistrationError as exc:
            return Response(
                {"code": exc.code, "field": exc.field, "detail": exc.message}, status=status.HTTP_400_BAD_REQUEST
            )
        return Response(cluster_summary(cluster))


class NodeListView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="nodes_list",
        parameters=[
            OpenApiParameter("selector", str, description="k=v,k2=v2 (keys ANDed, comma values = any of)"),
            OpenApiParameter("cluster", str),
            OpenApiParameter("category", str, enum=["cloud", "edge", "robot", "unknown"]),
            OpenApiParameter("gpu_model", str),
            OpenApiParameter("label", str, description="key or key=value"),
            OpenApiParameter("system", bool, description="staff only: include system (control-plane) nodes"),
        ],
        responses={200: NodeMatchSerializer, 400: ErrorSerializer},
    )
    def get(self, request):
        q = request.query_params
        qs = Node.objects.select_related("cluster").order_by("cluster__name", "name")
        nodes = filter_nodes(
            qs,
            category=q.get("category", ""),
            gpu_model=q.get("gpu_model", ""),
            label=q.get("label", ""),
            cluster=q.get("cluster", ""),
            system=show_system_nodes(request.user, q),
        )
        selector = q.get("selector", "")
        if selector.strip():
            try:
                result = match_nodes(selector, nodes)
            except SelectorError as exc:
                return Response({"code": exc.code, "detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
            return Response(result.as_dict())
        per: dict[str, dict] = {}
        for n in nodes:
            e = per.setdefault(n.cluster.name, {"cluster": n.cluster.name, "count": 0, "schedulable": 0})
            e["count"] += 1
            e["schedulable"] += int(n.online and not n.unschedulable)
        return Response(
            {
                "selector": {},
                "count": len(nodes),
                "schedulable": sum(e["schedulable"] for e in per.values()),
                "clusters": sorted(per.values(), key=lambda e: e["cluster"]),
                "nodes": [node_summary(n) for n in nodes],
            }
        )


class NodeCordonView(APIView):
    permission_classes = [IsAdminUser]
    cordon = True

    @extend_schema(operation_id="nodes_cordon", request=None, responses={200: NodeSerializer, 502: ErrorSerializer})
    def post(self, request, cluster, name):
        node = get_object_or_404(Node.objects.select_related("cluster"), cluster__name=cluster, name=name)
        try:
            set_cordon(node, self.cordon, actor=request.user, request=request)
        except RuntimeFailure as exc:
            action = _("Cordon") if self.cordon else _("Uncordon")
            return Response(apierrors.runtime_failure(exc, action), status=status.HTTP_502_BAD_GATEWAY)
        return Response(node_summary(node))


class NodeUncordonView(NodeCordonView):
    cordon = False

    @extend_schema(operation_id="nodes_uncordon", request=None, responses={200: NodeSerializer, 502: ErrorSerializer})
    def post(self, request, cluster, name):
        return super().post(request, cluster, name)
