"""Signals other apps listen to.

``user_deactivated``: sent by ``accounts.users.deactivate_user`` after the account is inactive, its API tokens
are revoked and its login sessions are deleted. Keyword arguments: ``user`` (the deactivated User), ``actor``
(the admin, or None). Receivers close what the user still holds open: the WebTerminal closes their terminal
sessions (``terminal.services.user_sessions``); an SSH bastion should close their SSH sessions the same way::

    from accounts.signals import user_deactivated

    @receiver(user_deactivated)
    def close_ssh(sender, user, actor=None, **kwargs): ...

A receiver must not raise (``send_robust`` is used: one failing receiver never stops the others; failures are
logged).
"""

from django.dispatch import Signal

user_deactivated = Signal()
