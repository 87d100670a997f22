"""Routes of the deleted jobs' log archive pages (mounted at /log-archives/)."""

from django.urls import path

from jobs.web import archive_views

app_name = "log_archives"

urlpatterns = [
    path("", archive_views.archive_list, name="list"),
    path("<str:archive_id>/download/", archive_views.archive_download, name="download"),
]
