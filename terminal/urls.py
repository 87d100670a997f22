"""Pages of the terminal app (mounted at /terminal/)."""

from django.urls import path

from terminal import views

app_name = "terminal"
urlpatterns = [
    path("", views.terminal_page, name="terminal"),
    path("jobs/<str:job>/logs/", views.logs_page, name="logs"),
    path("jobs/<str:job>/logs/panel/", views.logs_panel, name="logs-panel"),
    path("jobs/<str:job>/logs/download/", views.download_log, name="log-download"),
]
