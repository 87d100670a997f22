"""Pages of the storage app."""

from django.urls import path

from storage import views

app_name = "storage"
urlpatterns = [path("", views.storage_list, name="list")]
