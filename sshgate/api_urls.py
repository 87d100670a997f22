from django.urls import path

from sshgate.api import SSHTargetsView

urlpatterns = [path("ssh/", SSHTargetsView.as_view(), name="api-ssh")]
