"""Pages of the sshkeys app."""

from django.urls import path

from sshkeys import views

app_name = "sshkeys"
urlpatterns = [
    path("", views.key_list, name="list"),
    path("<int:pk>/delete/", views.key_delete, name="delete"),
]
