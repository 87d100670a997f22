"""``/api/v1/tracking-credentials/``: the caller's experiment-tracking credentials (W&B, SwanLab) over REST.

- ``GET`` -> 200 ``[{name, kind, host, entity, api_key: "stored", created_at}]`` (the caller's own, by name).
- ``POST {name, kind, api_key, host?, entity?}`` -> 201 with the stored row; 400
  ``{"code": "invalid", "detail": {field: [message]}}`` in the request's language, through the same service as the
  account page (:func:`accounts.tracking.create`, which also audits it without the key).
- ``DELETE /api/v1/tracking-credentials/<name>/`` -> 204; 404 when the caller has no credential of that name
  (another user's included).

The key is write-only: no answer carries it, only ``"stored"``. Authentication, CSRF (session) and the body-size
limit are the project's REST defaults; each field is bounded before the service sees it.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import tracking
from accounts.models import TrackingCredential
from rlark_console import apierrors


class TrackingCredentialSerializer(serializers.ModelSerializer):
    """One credential as the API shows it: the key only as ``"stored"``."""

    api_key = serializers.SerializerMethodField()

    class Meta:
        model = TrackingCredential
        fields = ["name", "kind", "host", "entity", "api_key", "created_at"]

    def get_api_key(self, obj) -> str:
        return "stored"


class TrackingCredentialInput(serializers.Serializer):
    """The POST body; lengths are bounded here, the rules are the service's."""

    name = serializers.CharField(max_length=63, allow_blank=True, trim_whitespace=True)
    kind = serializers.CharField(max_length=16, allow_blank=True)
    api_key = serializers.CharField(max_length=tracking.KEY_MAX_CHARS, allow_blank=True, write_only=True)
    host = serializers.CharField(max_length=tracking.MAX_HOST_CHARS, allow_blank=True, required=False, default="")
    entity = serializers.CharField(max_length=tracking.MAX_ENTITY_CHARS, allow_blank=True, required=False, default="")


def _invalid(field: str, message) -> dict:
    return {"code": "invalid", "detail": {field or "non_field_errors": [str(message)]}}


class TrackingCredentialListView(APIView):
    """GET: the caller's credentials. POST: store one (201)."""

    serializer_class = TrackingCredentialSerializer

    @extend_schema(responses=TrackingCredentialSerializer(many=True), operation_id="tracking_credentials_list")
    def get(self, request):
        rows = TrackingCredential.objects.filter(user=request.user).defer("api_key")
        return Response(TrackingCredentialSerializer(rows, many=True).data)

    @extend_schema(
        request=TrackingCredentialInput,
        responses={201: TrackingCredentialSerializer},
        operation_id="tracking_credentials_create",
    )
    def post(self, request):
        body = TrackingCredentialInput(data=request.data)
        if not body.is_valid():
            return Response({"code": "invalid", "detail": body.errors}, status=status.HTTP_400_BAD_REQUEST)
        data = body.validated_data
        try:
            cred = tracking.create(
                request.user,
                data["name"],
                data["kind"],
                data["api_key"],
                data.get("host", ""),
                request,
                entity=data.get("entity", ""),
            )
        except tracking.CredentialError as exc:
            return Response(_invalid(exc.field, exc), status=status.HTTP_400_BAD_REQUEST)
        return Response(TrackingCredentialSerializer(cred).data, status=status.HTTP_201_CREATED)


class TrackingCredentialDetailView(APIView):
    """DELETE: remove one of the caller's credentials by name (204); 404 for a name the caller has none of."""

    serializer_class = TrackingCredentialSerializer

    @extend_schema(responses={204: None}, operation_id="tracking_credentials_destroy")
    def delete(self, request, name: str):
        try:
            tracking.delete(request.user, request=request, name=name)
        except TrackingCredential.DoesNotExist:
            return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
        return Response(status=status.HTTP_204_NO_CONTENT)
