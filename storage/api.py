"""``/api/v1/storage-classes/`` and ``/api/v1/image-registries/``. Secrets are write-only: responses carry
``has_secret``/``has_password`` booleans, never the values (upstream-rlark 13, 14)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import ImageRegistry
from rlark_console.jsonbody import flat_fields
from storage import services
from storage.models import StorageClass


class AdminWrites(IsAuthenticated):
    """Reading for every signed-in user, writing for staff only."""

    def has_permission(self, request, view):
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return super().has_permission(request, view)
        return IsAdminUser().has_permission(request, view)


class StorageClassSerializer(serializers.Serializer):
    """Request/response shape; ``secret`` is write-only, responses carry ``has_secret``."""

    id = serializers.IntegerField(read_only=True)
    cluster = serializers.CharField()
    name = serializers.CharField()
    provider = serializers.ChoiceField(choices=StorageClass.Provider.choices)
    description = serializers.CharField(required=False)
    parameters = serializers.JSONField(read_only=True)
    endpoint = serializers.CharField(write_only=True, required=False)
    bucket = serializers.CharField(write_only=True, required=False)
    region = serializers.CharField(write_only=True, required=False)
    access_key_id = serializers.CharField(write_only=True, required=False)
    secret = serializers.CharField(write_only=True, required=False)
    path_style = serializers.BooleanField(write_only=True, required=False)
    storage_class_name = serializers.CharField(write_only=True, required=False)
    has_secret = serializers.BooleanField(read_only=True)
    created_at = serializers.DateTimeField(read_only=True)


class RegistrySerializer(serializers.Serializer):
    """Request/response shape; ``password`` is write-only, responses carry ``has_password``."""

    name = serializers.CharField()
    registry = serializers.CharField()
    username = serializers.CharField(required=False)
    password = serializers.CharField(write_only=True, required=False)
    public = serializers.BooleanField(required=False)
    has_password = serializers.BooleanField(read_only=True)
    created_at = serializers.DateTimeField(read_only=True)


class RegistryCheckSerializer(serializers.Serializer):
    image = serializers.CharField()
    registry = serializers.CharField(allow_null=True)
    public = serializers.BooleanField()
    has_credentials = serializers.BooleanField()
    warning = serializers.CharField(allow_null=True)


def storage_class_data(sc: StorageClass) -> dict:
    """Public view of a storage class: ``{id, cluster, name, provider, description, parameters, has_secret,
    created_at}``."""
    return {
        "id": sc.pk,
        "cluster": sc.cluster.name,
        "name": sc.name,
        "provider": sc.provider,
        "description": sc.description,
        "parameters": services.public_parameters(sc),
        "has_secret": bool(sc.secret),
        "created_at": serializers.DateTimeField().to_representation(sc.created_at),
    }


def _error(exc: services.StorageError) -> Response:
    return Response({"code": "invalid", "detail": exc.errors}, status=status.HTTP_400_BAD_REQUEST)


def _plain(data) -> dict:
    """Request data as a plain dict of single values (400 for a nested value, see ``flat_fields``)."""
    return flat_fields(data)


class StorageClassListView(APIView):
    """GET ``?cluster=<name|id>``: list. POST (admin) ``{cluster, name, provider, description, endpoint, bucket,
    region, access_key_id, secret, path_style}`` or ``{..., provider: "kubernetes", storage_class_name}`` -> 201."""

    permission_classes = [AdminWrites]
    serializer_class = StorageClassSerializer

    @extend_schema(responses=StorageClassSerializer(many=True), operation_id="storage_classes_list")
    def get(self, request):
        cluster = request.query_params.get("cluster")
        qs = services.classes_for_cluster(cluster) if cluster else StorageClass.objects.select_related("cluster")
        return Response([storage_class_data(sc) for sc in qs])

    def post(self, request):
        try:
            sc = services.save_storage_class(_plain(request.data), None, request.user, request)
        except services.StorageError as exc:
            return _error(exc)
        return Response(storage_class_data(sc), status=status.HTTP_201_CREATED)


class StorageClassDetailView(APIView):
    """GET one; PUT/PATCH (admin; empty ``secret`` keeps the stored one; name immutable); DELETE (admin)."""

    permission_classes = [AdminWrites]
    serializer_class = StorageClassSerializer

    def get(self, request, pk: int):
        return Response(storage_class_data(get_object_or_404(StorageClass.objects.select_related("cluster"), pk=pk)))

    def put(self, request, pk: int):
        sc = get_object_or_404(StorageClass, pk=pk)
        try:
            sc = services.save_storage_class(_plain(request.data), sc, request.user, request)
        except services.StorageError as exc:
            return _error(exc)
        return Response(storage_class_data(sc))

    patch = put

    def delete(self, request, pk: int):
        services.delete_storage_class(get_object_or_404(StorageClass, pk=pk), request.user, request)
        return Response(status=status.HTTP_204_NO_CONTENT)


def registry_data(reg: ImageRegistry) -> dict:
    """``{name, registry, username, public, has_password, created_at}`` (the password never leaves)."""
    return {
        "name": reg.name,
        "registry": reg.registry,
        "username": reg.username,
        "public": reg.public,
        "has_password": bool(reg.password),
        "created_at": serializers.DateTimeField().to_representation(reg.created_at),
    }


class RegistryListView(APIView):
    """GET (admin): list. POST (admin) ``{name, registry, username, password, public}`` -> 201."""

    permission_classes = [IsAdminUser]
    serializer_class = RegistrySerializer

    @extend_schema(responses=RegistrySerializer(many=True), operation_id="image_registries_list")
    def get(self, request):
        return Response([registry_data(r) for r in ImageRegistry.objects.all()])

    def post(self, request):
        try:
            reg = services.save_registry(_plain(request.data), None, request.user, request)
        except services.StorageError as exc:
            return _error(exc)
        return Response(registry_data(reg), status=status.HTTP_201_CREATED)


class RegistryDetailView(APIView):
    """GET/PUT/PATCH/DELETE one registry record by name (admin). PUT without ``password`` keeps it."""

    permission_classes = [IsAdminUser]
    serializer_class = RegistrySerializer

    def get(self, request, name: str):
        return Response(registry_data(get_object_or_404(ImageRegistry, name=name)))

    def put(self, request, name: str):
        reg = get_object_or_404(ImageRegistry, name=name)
        try:
            reg = services.save_registry(_plain(request.data), reg, request.user, request)
        except services.StorageError as exc:
            return _error(exc)
        return Response(registry_data(reg))

    patch = put

    def delete(self, request, name: str):
        services.delete_registry(get_object_or_404(ImageRegistry, name=name), request.user, request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RegistryCheckView(APIView):
    """GET ``?image=<ref>`` (any user): ``{"image", "registry": <name>|null, "public", "has_credentials",
    "warning": <text>|null}`` for the wizard's image field."""

    serializer_class = RegistryCheckSerializer

    def get(self, request):
        image = request.query_params.get("image", "")
        reg = services.registry_for_image(image) if image else None
        return Response(
            {
                "image": image,
                "registry": reg.name if reg else None,
                "public": bool(reg and reg.public),
                "has_credentials": bool(reg and reg.username and reg.password),
                "warning": services.image_pull_warning(image),
            }
        )
