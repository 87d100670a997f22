from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SshkeysConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sshkeys"
    verbose_name = _("SSH keys")
