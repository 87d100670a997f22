"""Password logins that hold no database connection while the password is hashed.

Django's ``ModelBackend`` looks the user up, then checks the password (PBKDF2, about half a second of CPU) with the
connection still open. In the web tier a connection is a pooled one (``RLARK_DB_POOL``, 4 per worker), so 20
simultaneous logins kept every connection busy with hashing and the next requests waited until the pool's timeout
(``psycopg_pool.PoolTimeout``, a 500). :class:`PoolFriendlyModelBackend` gives the connection back before the hash;
the login's next query (session, last login) takes one from the pool again.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest

from rlark_console.db_threads import release_connections


class PoolFriendlyModelBackend(ModelBackend):
    """``ModelBackend`` that releases this thread's database connections (outside ``atomic()``) between the user's
    lookup and the password hash."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs
    ):
        """The active user ``username`` whose password is ``password``, else None (as ``ModelBackend``)."""
        users = get_user_model()
        if username is None:
            username = kwargs.get(users.USERNAME_FIELD)
        if username is None or password is None:
            return None
        try:
            user = users._default_manager.get_by_natural_key(username)
        except users.DoesNotExist:
            release_connections()
            users().set_password(password)  # as long as a real check: no user enumeration by timing
            return None
        release_connections()
        if user.check_password(password) and self.user_can_authenticate(user):
            return user
        return None
