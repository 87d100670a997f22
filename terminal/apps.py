from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TerminalConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "terminal"
    verbose_name = _("Logs and WebTerminal")

    def ready(self) -> None:
        # local import: a receiver module is imported once the app registry is ready (it registers itself)
        from terminal.services import user_sessions  # noqa: F401
