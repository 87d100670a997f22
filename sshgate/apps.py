from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SshgateConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sshgate"
    verbose_name = _("SSH bastion")
