from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class NotificationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "notifications"
    verbose_name = _("Notifications")

    def ready(self) -> None:
        """Listen to the status sync's events (``jobs.signals.job_events``): the receiver only enqueues."""
        from jobs.signals import job_events
        from notifications import tasks  # local import: the tasks load the models (app registry ready)

        job_events.connect(tasks.on_job_events, dispatch_uid="notifications.job_events")
