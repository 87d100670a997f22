from django.apps import AppConfig


class LauncherConfig(AppConfig):
    name = "launcher"
