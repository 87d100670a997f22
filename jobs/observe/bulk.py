"""One-statement bulk UPDATE of many rows with different values (the status sync writes thousands of Pods).

Django's ``bulk_update`` builds one ``CASE WHEN pk = ... THEN ...`` per field and row; at 3,000 Pods x 14 fields
that alone costs seconds of Python. On PostgreSQL this writes ``UPDATE t SET f = v.f ... FROM (VALUES ...) AS v``
in batches of ``BATCH`` rows instead; other databases keep ``bulk_update``.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection, models

BATCH = 1000


def bulk_update(model: type[models.Model], objs: Sequence[models.Model], fields: Sequence[str]) -> int:
    """Write ``fields`` of every object in ``objs`` (saved rows) to the database. Returns the rows written."""
    objs = [o for o in objs if o.pk is not None]
    if not objs or not fields:
        return 0
    if connection.vendor != "postgresql":
        return model.objects.bulk_update(objs, list(fields), batch_size=500)
    meta = model._meta
    pk = meta.pk
    cols = [meta.get_field(name) for name in fields]
    qn = connection.ops.quote_name
    table = qn(meta.db_table)
    names = ", ".join(qn(f"c{i}") for i in range(len(cols) + 1))
    sets = ", ".join(f"{qn(c.column)} = v.{qn(f'c{i + 1}')}::{c.db_type(connection)}" for i, c in enumerate(cols))
    where = f"{table}.{qn(pk.column)} = v.{qn('c0')}::{pk.rel_db_type(connection)}"
    written = 0
    with connection.cursor() as cursor:
        for start in range(0, len(objs), BATCH):
            chunk = objs[start : start + BATCH]
            params: list = []
            for obj in chunk:
                params.append(pk.get_db_prep_save(obj.pk, connection))
                params.extend(c.get_db_prep_save(getattr(obj, c.attname), connection) for c in cols)
            row = "(" + ", ".join(["%s"] * (len(cols) + 1)) + ")"
            values = ", ".join([row] * len(chunk))
            cursor.execute(f"UPDATE {table} SET {sets} FROM (VALUES {values}) AS v({names}) WHERE {where}", params)
            written += cursor.rowcount
    return written
