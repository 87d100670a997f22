from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

from domains.signals import domain_users
from sshkeys.signals import key_users


class JobsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "jobs"
    verbose_name = _("Jobs")

    def ready(self) -> None:
        """Answer the domains' and SSH keys' questions about the jobs that use them (``jobs.observe.resource_users``),
        and give the controller its "reconcile soon" hooks: the Celery task ``jobs.tasks.reconcile_job`` (and the
        stored log scans theirs: ``jobs.tasks.refresh_log_scans``).

        The controller never imports ``jobs.tasks`` (Celery is known only to that entry point); this is the
        one place that joins them. The hooks look the task up at call time, so a test may patch its ``delay``.
        """
        # local import: jobs.tasks loads the models, which exist only once the app registry is ready
        from jobs import tasks
        from jobs.observe import resource_users  # local import: it loads the models too

        tasks.install_reconcile_hooks()
        # The apps below ask which jobs use a domain or an SSH key; the jobs app answers (they never import it).
        domain_users.connect(resource_users.jobs_using_domain, dispatch_uid="jobs.domain_users")
        key_users.connect(resource_users.jobs_using_keys, dispatch_uid="jobs.key_users")
