"""Pages of the domains app (administrators)."""

from django.urls import path

from domains import views

app_name = "domains"
urlpatterns = [
    path("", views.domain_list, name="list"),
    path("<str:name>/", views.domain_detail, name="detail"),
    path("<str:name>/delete/", views.domain_delete, name="delete"),
]
