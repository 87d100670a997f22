"""REST API routes of the jobs app (mounted under /api/v1/)."""

from django.urls import path

from jobs.api import views
from jobs.api.log_archives import LogArchiveListView, LogArchiveLogView
from jobs.api.logs import JobLogsView, JobRayLogsView

urlpatterns = [
    path("jobs/", views.JobListView.as_view(), name="api-jobs"),
    path("jobs/validate/", views.JobValidateView.as_view(), name="api-jobs-validate"),
    path("jobs/<str:name>/", views.JobDetailView.as_view(), name="api-job"),
    path("jobs/<str:name>/stop/", views.JobActionView.as_view(action="stop"), name="api-job-stop"),
    path("jobs/<str:name>/start/", views.JobActionView.as_view(action="start"), name="api-job-start"),
    path("jobs/<str:name>/restart/", views.JobActionView.as_view(action="restart"), name="api-job-restart"),
    path("jobs/<str:name>/clone/", views.JobCloneView.as_view(), name="api-job-clone"),
    path("jobs/<str:name>/logs/", JobLogsView.as_view(), name="api-job-logs"),
    path("jobs/<str:name>/ray-logs/", JobRayLogsView.as_view(), name="api-job-ray-logs"),
    path("rlinf/plan/", views.RLinfPlanView.as_view(), name="api-rlinf-plan"),
    path("log-archives/", LogArchiveListView.as_view(), name="api-log-archives"),
    path("log-archives/<str:archive_id>/logs/", LogArchiveLogView.as_view(), name="api-log-archive-log"),
]

# Diagnosis, run check and metrics.
from jobs.api import diagnosis as diagnosis_api  # noqa: E402

urlpatterns += diagnosis_api.urlpatterns

# Checkpoints and the resume from one.
from jobs.api import checkpoints as checkpoints_api  # noqa: E402

urlpatterns += checkpoints_api.urlpatterns

# The safety approval of a robot job.
from jobs.api import safety as safety_api  # noqa: E402

urlpatterns += safety_api.urlpatterns
