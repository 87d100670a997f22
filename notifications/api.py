"""``/api/v1/notifications/``: the caller's channels and rules (owner-only; another user's are a 404).

- ``channels/``: GET list, POST ``{name, kind, url?, secret?, email?, language?}`` -> 201; ``channels/<id>/``:
  GET, PATCH ``{name?, url?, secret?, clear_secret?, email?, language?}`` (a blank ``url`` or ``secret`` keeps the
  stored one; the answer's ``url`` is masked), DELETE. The answer gives the URL to its owner and never the
  secret (``has_secret``); ``channels/<id>/test/``: POST sends a test message (202), its outcome in
  ``test_status`` (pending, retrying, sent, failed), ``test_error``, ``test_at``.
- ``rules/``: GET list (``?job=<name>``: the rules that apply to that job), POST ``{channel, events,
  pending_minutes?, log_pattern?, job?}`` -> 201 (``job``: a job the caller may change; without it, a default for
  all the caller's jobs); ``rules/<id>/``: GET, PATCH ``{channel?, events?, pending_minutes?, log_pattern?,
  enabled?}``, DELETE. Each rule shows ``last_status``, ``last_error``,
  ``last_at`` of its newest delivery.

Errors: 400 ``{"code", "field", "detail"}`` with a localized ``detail``.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs import policy
from notifications import edit, services, testrequest
from notifications.models import Channel, Rule
from rlark_console import apierrors


class ChannelSerializer(serializers.ModelSerializer):
    has_secret = serializers.SerializerMethodField()

    class Meta:
        model = Channel
        fields = [
            "id",
            "name",
            "kind",
            "url",
            "email",
            "language",
            "has_secret",
            "created_at",
            "test_status",
            "test_error",
            "test_at",
        ]

    test_error = serializers.CharField(source="test_error_text", read_only=True)

    def get_has_secret(self, obj: Channel) -> bool:
        return bool(obj.secret)


class MaskedChannelSerializer(ChannelSerializer):
    """A channel with its URL masked (``https://host/…``): the answer to an edit does not echo the URL."""

    url = serializers.SerializerMethodField()

    def get_url(self, obj: Channel) -> str:
        return edit.masked_url(obj.url)


class RuleSerializer(serializers.ModelSerializer):
    job = serializers.CharField(source="job.name", default=None, read_only=True)
    channel_name = serializers.CharField(source="channel.name", read_only=True)
    last_error = serializers.CharField(source="error_text", read_only=True)

    class Meta:
        model = Rule
        fields = [
            "id",
            "channel",
            "channel_name",
            "job",
            "events",
            "pending_minutes",
            "log_pattern",
            "enabled",
            "last_status",
            "last_error",
            "last_at",
        ]


def _error(exc: services.NotifyError) -> Response:
    body = {"code": exc.code, "field": exc.field, "detail": str(exc.message)}
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


def _data(request) -> dict:
    return dict(request.data.items()) if hasattr(request.data, "items") else {}


class ChannelListView(APIView):
    """GET the caller's channels; POST one (201)."""

    serializer_class = ChannelSerializer

    @extend_schema(operation_id="v1_notifications_channels_list", responses={200: ChannelSerializer(many=True)})
    def get(self, request):
        return Response(ChannelSerializer(services.channels_of(request.user), many=True).data)

    def post(self, request):
        try:
            channel = services.create_channel(request.user, _data(request), request)
        except services.NotifyError as exc:
            return _error(exc)
        return Response(ChannelSerializer(channel).data, status=status.HTTP_201_CREATED)


class ChannelDetailView(APIView):
    """GET, PATCH or DELETE one of the caller's channels."""

    serializer_class = ChannelSerializer

    def _get(self, request, pk: int) -> Channel | None:
        return services.channels_of(request.user).filter(pk=pk).first()

    def get(self, request, pk: int):
        channel = self._get(request, pk)
        if channel is None:
            return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
        return Response(ChannelSerializer(channel).data)

    def delete(self, request, pk: int):
        channel = self._get(request, pk)
        if channel is None:
            return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
        services.delete_channel(request.user, channel, request)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=ChannelSerializer, responses={200: MaskedChannelSerializer})
    def patch(self, request, pk: int):
        channel = self._get(request, pk)
        if channel is None:
            return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
        try:
            channel = edit.update_channel(request.user, channel, _data(request), request)
        except services.NotifyError as exc:
            return _error(exc)
        return Response(MaskedChannelSerializer(channel).data)


class ChannelTestView(APIView):
    """POST: send a test message on one of the caller's channels (202; its ``test_status`` follows)."""

    serializer_class = MaskedChannelSerializer

    @extend_schema(request=None, responses={202: MaskedChannelSerializer})
    def post(self, request, pk: int):
        channel = services.channels_of(request.user).filter(pk=pk).first()
        if channel is None:
            return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
        try:
            channel = testrequest.start(request.user, channel, request)
        except services.NotifyError as exc:
            return _error(exc)
        return Response(MaskedChannelSerializer(channel).data, status=status.HTTP_202_ACCEPTED)


class RuleListView(APIView):
    """GET the caller's default rules, or ``?job=<name>`` those that apply to a job; POST one (201)."""

    serializer_class = RuleSerializer

    @extend_schema(operation_id="v1_notifications_rules_list", responses={200: RuleSerializer(many=True)})
    def get(self, request):
        name = str(request.query_params.get("job") or "")[:63]
        if name:
            try:
                job = policy.get_job_for(request.user, name)
            except Http404:
                return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
            rules = services.rules_of(request.user, job)
        else:
            rules = services.rules_of(request.user)
        return Response(RuleSerializer(rules, many=True).data)

    def post(self, request):
        data = _data(request)
        if hasattr(request.data, "getlist"):
            data["events"] = request.data.getlist("events") or data.get("events")
        job = None
        name = str(data.get("job") or "")[:63]
        if name:
            try:
                job = policy.get_job_for(request.user, name)
            except Http404:
                return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
            if not policy.can_change_job(request.user, job) or job.owner_id != request.user.pk:
                raise PermissionDenied
        try:
            rule = services.create_rule(request.user, data, job=job, request=request)
        except services.NotifyError as exc:
            return _error(exc)
        return Response(RuleSerializer(rule).data, status=status.HTTP_201_CREATED)


class RuleDetailView(APIView):
    """GET, PATCH or DELETE one of the caller's rules."""

    serializer_class = RuleSerializer

    def _get(self, request, pk: int) -> Rule | None:
        return Rule.objects.filter(owner=request.user, pk=pk).select_related("channel", "job").first()

    def get(self, request, pk: int):
        rule = self._get(request, pk)
        if rule is None:
            return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
        return Response(RuleSerializer(rule).data)

    def delete(self, request, pk: int):
        rule = self._get(request, pk)
        if rule is None:
            return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
        services.delete_rule(request.user, rule, request)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def patch(self, request, pk: int):
        rule = self._get(request, pk)
        if rule is None:
            return Response(apierrors.not_found(), status=status.HTTP_404_NOT_FOUND)
        data = _data(request)
        if hasattr(request.data, "getlist") and "events" in request.data:
            data["events"] = request.data.getlist("events")
        try:
            rule = edit.update_rule(request.user, rule, data, request)
        except services.NotifyError as exc:
            return _error(exc)
        return Response(RuleSerializer(rule).data)
