"""What the sshkeys app asks of the apps above it, as Django signals (the jobs app answers; ``jobs.apps``)."""

from __future__ import annotations

from django.dispatch import Signal

#: Sent with ``user`` and ``keys`` (:class:`sshkeys.models.SSHPublicKey` rows of that user); each receiver returns
#: ``{key id: [job names]}``: the jobs the user may see whose ``spec.sshPublicKeys`` carries each key.
key_users = Signal()
