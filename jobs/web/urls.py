"""Pages of the jobs app (mounted at /jobs/)."""

from django.urls import path

from jobs.web import views

app_name = "jobs"
urlpatterns: list = [
    path("", views.job_list, name="list"),
    path("<str:name>/", views.job_detail, name="detail"),
    path("<str:name>/log/", views.job_log, name="log"),
    path("<str:name>/<str:action>/", views.job_action, name="action"),
]

# Job wizard: registered first so "new/" is not taken for a job name.
from jobs.web import wizard_views  # noqa: E402

urlpatterns[:0] = wizard_views.urlpatterns

# Diagnosis, Run check and Metrics tabs: registered before "<name>/<action>/".
from jobs.web import diagnosis_views  # noqa: E402

urlpatterns[:0] = diagnosis_views.urlpatterns

# Open in TensorBoard: registered before "<name>/<action>/".
from jobs.web import tensorboard_views  # noqa: E402

urlpatterns[:0] = tensorboard_views.urlpatterns

# Checkpoints tab and the resume from one: registered before "<name>/<action>/".
from jobs.web import checkpoint_views  # noqa: E402

urlpatterns[:0] = checkpoint_views.urlpatterns

# The safety approval of a robot job: registered before "<name>/<action>/".
from jobs.web import safety_views  # noqa: E402

urlpatterns[:0] = safety_views.urlpatterns
