from django.apps import AppConfig


class SshkeysConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sshkeys"
