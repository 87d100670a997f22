"""Indexes for the job lists: ``created_at`` alone and after ``phase`` / ``owner``, and on PostgreSQL
trigram GIN indexes for the case-insensitive name search (Django's ``icontains`` is ``UPPER(col::text) LIKE
UPPER(%s)``, so the indexes are on that expression). Without the ``pg_trgm`` extension (no privilege to create it)
the search indexes are skipped and the search scans, as before."""

from django.conf import settings
from django.db import migrations, models, transaction

SEARCH_COLUMNS = ("name", "display_name")


def add_search_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic():  # a savepoint: a refused CREATE EXTENSION leaves the migration usable
            schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except Exception:  # noqa: BLE001 - no privilege or no contrib package: keep the sequential search
        return
    for column in SEARCH_COLUMNS:
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS job_{column}_trgm_idx ON jobs_job "
            f'USING gin (UPPER("{column}"::text) gin_trgm_ops)'
        )


def drop_search_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for column in SEARCH_COLUMNS:
        schema_editor.execute(f"DROP INDEX IF EXISTS job_{column}_trgm_idx")


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0005_task_rollout"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["-created_at"], name="job_created_idx"),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["phase", "-created_at"], name="job_phase_created_idx"),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["owner", "-created_at"], name="job_owner_created_idx"),
        ),
        migrations.RunPython(add_search_indexes, drop_search_indexes),
    ]
