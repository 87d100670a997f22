from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "accounts"
    verbose_name = _("Accounts and audit")

    def ready(self):
        """Every back-office change lands in the audit log: Django admin writes its history through
        ``LogEntryManager.log_actions`` (single saves and bulk deletions), so each entry it returns is copied
        into an AuditEvent by :func:`accounts.services.record_admin_change`."""
        from django.contrib.admin.models import LogEntryManager

        if getattr(LogEntryManager.log_actions, "_rlark_audited", False):
            return
        original = LogEntryManager.log_actions

        def log_actions(manager, *args, **kwargs):
            from accounts.services import record_admin_change

            result = original(manager, *args, **kwargs)
            for entry in result if isinstance(result, list) else [result]:
                record_admin_change(entry)
            return result

        log_actions._rlark_audited = True
        LogEntryManager.log_actions = log_actions
