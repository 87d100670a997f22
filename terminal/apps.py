from django.apps import AppConfig


class TerminalConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "terminal"
