"""Pages of the jobs app."""

from django.urls import path  # noqa: F401

app_name = "jobs"
urlpatterns: list = []

# Job wizard (H6): registered first so "new/" is not taken for a job name.
from jobs import wizard_views  # noqa: E402

urlpatterns[:0] = wizard_views.urlpatterns
