"""Large ``IN`` lists bound as one parameter.

``Model.objects.filter(pk__in=ids)`` with 1,000 ids renders 1,000 placeholders; on PostgreSQL psycopg then spends
~0.1 s of Python per query splitting and binding them (measured in ``bench/sync.py``'s steady cycle: 0.2 s of a
1.1 s cycle, while the runtime lists were decoded on another thread). :func:`id_in` gives the same set as one
``bigint[]`` parameter (``= ANY`` through ``unnest``), and the plain list on other databases (SQLite's bound
variable limit is 32,766).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.db.models.expressions import RawSQL

SMALL = 50  # up to this many ids a plain list is as cheap


def id_in(ids: Iterable[int]) -> list[int] | RawSQL:
    """The right-hand side of an ``__in`` lookup for integer primary keys ``ids``."""
    values = [int(i) for i in ids]
    if connection.vendor != "postgresql" or len(values) <= SMALL:
        return values
    return RawSQL("SELECT unnest(%s::bigint[])", (values,))
