"""``/api/v1/tokens/`` (own API tokens) and ``/api/v1/audit/`` (admins: the audit log)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAdminUser
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import services
from accounts.models import APIToken, AuditEvent
from rlark_console import apierrors
from rlark_console.pagination import ConsolePagination


class TokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = APIToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at", "revoked"]


class TokenListView(APIView):
    """GET: the caller's tokens (prefix only). POST ``{name}`` -> 201 with ``key`` (shown this once)."""

    serializer_class = TokenSerializer

    @extend_schema(responses=TokenSerializer(many=True), operation_id="tokens_list")
    def get(self, request):
        return Response(TokenSerializer(services.tokens_for(request.user), many=True).data)

    def post(self, request):
        try:
            token, key = services.create_token(request.user, str(request.data.get("name", "")), request)
        except ValueError:
            return Response(apierrors.required("name"), status=400)
        return Response({**TokenSerializer(token).data, "key": key}, status=status.HTTP_201_CREATED)


class TokenDetailView(APIView):
    """DELETE: revoke (204); 404 for other users' tokens."""

    serializer_class = TokenSerializer

    def delete(self, request, pk: int):
        try:
            services.revoke_token(request.user, pk, request)
        except APIToken.DoesNotExist:
            return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AuditSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name")

    class Meta:
        model = AuditEvent
        fields = ["id", "at", "actor", "action", "object_type", "object_id", "detail", "remote_addr"]


class AuditListView(APIView):
    """GET (admin): newest first, paginated (``limit``/``offset``); filters ``actor``, ``action`` (prefix),
    ``object_type``, ``object_id``."""

    permission_classes = [IsAdminUser]
    serializer_class = AuditSerializer

    def get(self, request):
        qs = AuditEvent.objects.all()
        params = request.query_params
        if params.get("actor"):
            qs = qs.filter(actor_name=params["actor"])
        if params.get("action"):
            qs = qs.filter(action__startswith=params["action"])
        if params.get("object_type"):
            qs = qs.filter(object_type=params["object_type"])
        if params.get("object_id"):
            qs = qs.filter(object_id=params["object_id"])
        paginator = ConsolePagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(AuditSerializer(page, many=True).data)
