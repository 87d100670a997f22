"""REST API routes of the jobs app (mounted under /api/v1/)."""

from django.urls import path

from jobs.api import views

urlpatterns = [
    path("jobs/", views.JobListView.as_view(), name="api-jobs"),
    path("jobs/validate/", views.JobValidateView.as_view(), name="api-jobs-validate"),
    path("jobs/<str:name>/", views.JobDetailView.as_view(), name="api-job"),
    path("jobs/<str:name>/stop/", views.JobActionView.as_view(action="stop"), name="api-job-stop"),
    path("jobs/<str:name>/start/", views.JobActionView.as_view(action="start"), name="api-job-start"),
    path("jobs/<str:name>/restart/", views.JobActionView.as_view(action="restart"), name="api-job-restart"),
    path("jobs/<str:name>/clone/", views.JobCloneView.as_view(), name="api-job-clone"),
    path("rlinf/plan/", views.RLinfPlanView.as_view(), name="api-rlinf-plan"),
]
