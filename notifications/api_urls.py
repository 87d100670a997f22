"""REST API routes of the notifications app (mounted under /api/v1/)."""

from django.urls import path

from notifications import api

urlpatterns = [
    path("notifications/channels/", api.ChannelListView.as_view(), name="api-notify-channels"),
    path("notifications/channels/<int:pk>/", api.ChannelDetailView.as_view(), name="api-notify-channel"),
    path("notifications/channels/<int:pk>/test/", api.ChannelTestView.as_view(), name="api-notify-channel-test"),
    path("notifications/rules/", api.RuleListView.as_view(), name="api-notify-rules"),
    path("notifications/rules/<int:pk>/", api.RuleDetailView.as_view(), name="api-notify-rule"),
]
