"""``/api/v1/domains/``: list (any user: names and CIDRs), create/delete and allocation detail (admins)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import Count
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from domains import services
from domains.models import Domain, IPAllocation


class AllocationSerializer(serializers.ModelSerializer):
    pod = serializers.CharField(source="pod_key")

    class Meta:
        model = IPAllocation
        fields = ["ip", "job", "task", "pod", "created_at"]


class DomainSerializer(serializers.Serializer):
    """Shape of a domain in responses (POST accepts ``name`` and ``cidr``)."""

    name = serializers.CharField()
    cidr = serializers.CharField()
    allocated = serializers.IntegerField(read_only=True)
    capacity = serializers.IntegerField(read_only=True)
    created_at = serializers.DateTimeField(read_only=True)
    allocations = AllocationSerializer(many=True, read_only=True)


def domain_data(domain: Domain, with_allocations: bool = False) -> dict:
    data = {
        "name": domain.name,
        "cidr": domain.cidr,
        "allocated": getattr(domain, "n_alloc", None),
        "capacity": services.capacity(domain.cidr),
        "created_at": serializers.DateTimeField().to_representation(domain.created_at),
    }
    if data["allocated"] is None:
        data["allocated"] = domain.allocations.count()
    if with_allocations:
        data["allocations"] = AllocationSerializer(services.search_allocations(domain), many=True).data
    return data


class AdminWrites(IsAuthenticated):
    """Reading for every signed-in user, writing for staff only."""

    def has_permission(self, request, view):
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return super().has_permission(request, view)
        return IsAdminUser().has_permission(request, view)


class DomainListView(APIView):
    """GET: ``[{name, cidr, allocated, capacity, created_at}]``. POST ``{name, cidr}`` (admin) -> 201, or 400
    ``{"code": "cidr_invalid|cidr_not_private|cidr_prefix|cidr_overlap|invalid", "detail"}``."""

    permission_classes = [AdminWrites]
    serializer_class = DomainSerializer

    @extend_schema(responses=DomainSerializer(many=True), operation_id="domains_list")
    def get(self, request):
        domains = Domain.objects.annotate(n_alloc=Count("allocations"))
        return Response([domain_data(d) for d in domains])

    def post(self, request):
        name = str(request.data.get("name", "")).strip()
        cidr = str(request.data.get("cidr", "")).strip()
        if not name:
            return Response({"code": "invalid", "detail": {"name": [_("This field is required.")]}}, status=400)
        if Domain.objects.filter(name=name).exists():
            detail = _("A network domain named “%(name)s” already exists.") % {"name": name[:253]}
            return Response({"code": "exists", "detail": detail}, status=409)
        try:
            domain = services.create_domain(name, cidr, request.user, request)
        except services.CIDRError as exc:
            return Response({"code": exc.code, "detail": exc.message}, status=status.HTTP_400_BAD_REQUEST)
        except ValidationError as exc:
            return Response({"code": "invalid", "detail": exc.message_dict}, status=status.HTTP_400_BAD_REQUEST)
        return Response(domain_data(domain, with_allocations=True), status=status.HTTP_201_CREATED)


class DomainDetailView(APIView):
    """GET (admin): the domain with ``allocations`` ``[{ip, job, task, pod, created_at}]``; DELETE (admin):
    204, or 409 ``{"code": "domain_in_use", "jobs": [...]}`` while an active job uses it."""

    permission_classes = [IsAdminUser]
    serializer_class = DomainSerializer

    def get(self, request, name: str):
        return Response(domain_data(get_object_or_404(Domain, name=name), with_allocations=True))

    def delete(self, request, name: str):
        domain = get_object_or_404(Domain, name=name)
        try:
            services.delete_domain(domain, request.user, request)
        except services.DomainInUse as exc:
            return Response({"code": "domain_in_use", "detail": str(exc), "jobs": exc.jobs}, status=409)
        return Response(status=status.HTTP_204_NO_CONTENT)
