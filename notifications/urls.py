"""Pages of the notifications app: the account page (mounted at /account/notifications/); the job tab's route is
in ``launcher.urls`` (``/jobs/<name>/notifications/``, before the jobs app's ``<name>/<action>/``)."""

from django.urls import path

from notifications import views

app_name = "notifications"
urlpatterns = [
    path("", views.page, name="page"),
    path("<str:what>/<int:pk>/delete/", views.delete, name="delete"),
    path("<str:what>/<int:pk>/edit/", views.edit, name="edit"),
    path("channel/<int:pk>/test/", views.test, name="test"),
]
