from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class JobsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "jobs"
    verbose_name = _("Jobs")

    def ready(self) -> None:
        """Give the controller its "reconcile soon" hooks: the Celery task ``jobs.tasks.reconcile_job`` (and the
        stored log scans theirs: ``jobs.tasks.refresh_log_scans``).

        The controller never imports ``jobs.tasks`` (Celery is known only to that entry point); this is the
        one place that joins them. The hooks look the task up at call time, so a test may patch its ``delay``.
        """
        # local import: jobs.tasks loads the models, which exist only once the app registry is ready
        from jobs import tasks

        tasks.install_reconcile_hooks()
