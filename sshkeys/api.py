"""``/api/v1/ssh-keys/``: list, add ({name, key} -> 201), show, delete. Users see only their own keys."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from rlark_console import apierrors
from sshkeys import batch, services
from sshkeys.models import SSHPublicKey


class SSHKeySerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    type = serializers.CharField(source="key_type", read_only=True)
    public_key = serializers.CharField(source="key", read_only=True)
    added_at = serializers.DateTimeField(source="created_at", read_only=True)

    class Meta:
        model = SSHPublicKey
        fields = ["id", "name", "owner", "type", "bits", "fingerprint", "public_key", "added_at"]


class SSHKeyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=services.NAME_MAX, required=False, allow_blank=True)
    key = serializers.CharField(trim_whitespace=True, max_length=batch.MAX_TEXT)
    user = serializers.CharField(max_length=150, required=False, allow_blank=True)


def error_response(exc: services.SSHKeyError) -> Response:
    """``{"code", "detail"}`` with 409 for duplicates, 400 otherwise."""
    code = status.HTTP_409_CONFLICT if isinstance(exc, services.DuplicateKeyError) else status.HTTP_400_BAD_REQUEST
    return Response({"code": exc.code, "detail": exc.message}, status=code)


class SSHKeyListView(APIView):
    """GET: the caller's keys (staff: all; ``?user=<name>`` filters). POST ``{name, key}`` -> 201
    (``public_key`` is accepted for ``key``, as upstream names it)."""

    serializer_class = SSHKeySerializer

    @extend_schema(responses=SSHKeySerializer(many=True), operation_id="ssh_keys_list")
    def get(self, request):
        qs = services.visible_keys(request.user)
        if request.query_params.get("user"):
            qs = qs.filter(owner__username=request.query_params["user"])
        return Response(SSHKeySerializer(qs, many=True).data)

    def post(self, request):
        """``{name, key, user?}``. ``key`` may be a whole ``authorized_keys`` file: one line -> 201 with the key;
        several -> 201 ``{"added": [key...], "count"}``, or 400 ``{"code": "ssh_key_lines_invalid", "detail",
        "errors": [{"line", "code", "detail"}]}`` with nothing stored (``sshkeys.batch``). ``user``: staff add
        for that user (400 ``user_invalid`` if no such active user); anyone else naming another user -> 403."""
        data = dict(request.data.items()) if hasattr(request.data, "items") else {}
        if "key" not in data and "public_key" in data:  # upstream field name (ssh-user-keys API)
            data["key"] = data["public_key"]
        ser = SSHKeyCreateSerializer(data=data)
        if not ser.is_valid():
            return Response({"code": "invalid", "detail": ser.errors}, status=status.HTTP_400_BAD_REQUEST)
        name, text = ser.validated_data.get("name", ""), ser.validated_data["key"]
        try:
            owner = batch.resolve_owner(request.user, ser.validated_data.get("user"))
            if owner == request.user and len(text.strip().splitlines()) == 1:
                key = services.add_key(request.user, name, text, request)
            else:
                keys = batch.add_keys(request.user, owner, name, text, request)
                if len(keys) > 1:
                    data = SSHKeySerializer(keys, many=True).data
                    return Response({"added": data, "count": len(keys)}, status=status.HTTP_201_CREATED)
                key = keys[0]
        except batch.OwnerForbidden as exc:
            return Response({"code": "forbidden", "detail": str(exc)}, status=status.HTTP_403_FORBIDDEN)
        except batch.BatchKeyError as exc:
            body = {"code": exc.code, "detail": exc.message, "errors": exc.errors}
            return Response(body, status=status.HTTP_400_BAD_REQUEST)
        except services.SSHKeyError as exc:
            return error_response(exc)
        return Response(SSHKeySerializer(key).data, status=status.HTTP_201_CREATED)


class SSHKeyDetailView(APIView):
    """GET one key; DELETE it (404 for keys of other users)."""

    serializer_class = SSHKeySerializer

    def _get(self, request, pk):
        try:
            return services.get_key_for(request.user, pk)
        except SSHPublicKey.DoesNotExist:
            return None

    def get(self, request, pk: int):
        key = self._get(request, pk)
        if key is None:
            return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
        return Response(SSHKeySerializer(key).data)

    def delete(self, request, pk: int):
        key = self._get(request, pk)
        if key is None:
            return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
        services.delete_key(request.user, key, request)
        return Response(status=status.HTTP_204_NO_CONTENT)
