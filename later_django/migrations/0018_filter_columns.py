"""``later_jobs_index.queue_name`` and ``error_class``, and the three filter indexes
the job lists' task, queue and error filters page through (issue 32).

The columns are written by the index row's own insert or update, which every stage
move already makes (no new statement on a job's path): the record's queue, and the
class path of its last error (``NULL`` when it has none). They are added by ``ALTER
TABLE … ADD COLUMN`` on both vendors, nullable with no default: no table rewrite on
PostgreSQL, and no SQLite table rebuild (Django's ``AddField`` would rebuild it and
drop the stage-count triggers; see migration 0014).

Each index is ``(namespace, stage, <filter column>, stage_date_ms, job_id)``: a
filtered page is a keyset walk of it in the list's order, newest first, so it reads
the page and no more, and a filter matching nothing reads nothing. They are partial,
``stage NOT IN ('enqueued', 'running')``: the ``enqueued`` list starts with the
delivery queue's messages and is filtered by looking at rows anyway, and ``running``
rows are as many as the jobs running (a filtered ``running`` list walks them through
``later_jobs_index_stage_idx``). So a job's start (its index row inserted, or moved
to ``running``: never a HOT update, ``stage`` is indexed) adds no entry to them; only
the finish (or a move to ``delayed``, ``waiting``, ``requeued``) does, one entry per
index, and the error index holds only rows with an error
(``error_class IS NOT NULL``).

Rows written before this migration are backfilled from their job records, in
batches of the primary key's order (one read of the records and one update per
batch); a row whose record is gone or cannot be decoded keeps ``NULL`` and is
found by no queue or error filter (its record could not say either). The indexes
are built after the backfill. Reverse: the indexes and the columns dropped.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from later_django.migration_operations import ReleasedMigration, VendorSQL

#: The partial predicate of the three indexes (the list statements repeat it, so
#: SQLite, which matches terms, uses them).
IN_FILTER_INDEXES = "stage NOT IN ('enqueued', 'running')"

ADD_COLUMNS = [
    "ALTER TABLE later_jobs_index ADD COLUMN queue_name varchar(200) NULL",
    "ALTER TABLE later_jobs_index ADD COLUMN error_class text NULL",
]
DROP_COLUMNS = [
    "ALTER TABLE later_jobs_index DROP COLUMN error_class",
    "ALTER TABLE later_jobs_index DROP COLUMN queue_name",
]
CREATE_INDEXES = [
    "CREATE INDEX later_jobs_index_task_idx ON later_jobs_index"
    f" (namespace, stage, payload_type, stage_date_ms, job_id) WHERE {IN_FILTER_INDEXES}",
    "CREATE INDEX later_jobs_index_queue_idx ON later_jobs_index"
    f" (namespace, stage, queue_name, stage_date_ms, job_id) WHERE {IN_FILTER_INDEXES}",
    "CREATE INDEX later_jobs_index_error_idx ON later_jobs_index"
    " (namespace, stage, error_class, stage_date_ms, job_id)"
    f" WHERE {IN_FILTER_INDEXES} AND error_class IS NOT NULL",
]
DROP_INDEXES = [
    "DROP INDEX later_jobs_index_error_idx",
    "DROP INDEX later_jobs_index_queue_idx",
    "DROP INDEX later_jobs_index_task_idx",
]

#: Index rows (and records) per backfill batch.
BACKFILL_BATCH = 1_000


def _filter_values(raw: bytes) -> tuple[str, str | None] | None:
    """``(queue_name, error_class)`` of a stored record, ``None`` if it cannot be read."""
    from later_django.core.records import decode_record
    from later_django.exceptions import RecordDecodeError

    try:
        record = decode_record(bytes(raw))
    except RecordDecodeError:
        return None
    error_class = record.errors[-1].exception_class_path if record.errors else None
    return record.queue_name, error_class


def backfill(apps: Any, schema_editor: Any) -> None:
    """Fills the new columns of every existing index row from its job record."""
    connection = schema_editor.connection
    postgres = connection.vendor == "postgresql"
    after: tuple[str, str] = ("", "")
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT namespace, job_id FROM later_jobs_index"
                " WHERE (namespace, job_id) > (%s, %s) ORDER BY namespace, job_id LIMIT %s",
                [*after, BACKFILL_BATCH],
            )
            rows = cursor.fetchall()
            if not rows:
                return
            after = rows[-1]
            keys = {f"{namespace}-job-{job_id}": (namespace, job_id) for namespace, job_id in rows}
            if postgres:
                cursor.execute(
                    "SELECT key, value FROM later_storage WHERE key = ANY(%s::varchar[])",
                    [list(keys)],
                )
            else:
                marks = ", ".join(["%s"] * len(keys))
                cursor.execute(
                    f"SELECT key, value FROM later_storage WHERE key IN ({marks})", list(keys)
                )
            updates = []
            for key, raw in cursor.fetchall():
                values = _filter_values(raw)
                if values is not None:
                    updates.append((*values, *keys[key]))
            if not updates:
                continue
            if postgres:
                queues = [update[0] for update in updates]
                errors = [update[1] for update in updates]
                namespaces = [update[2] for update in updates]
                job_ids = [update[3] for update in updates]
                cursor.execute(
                    "UPDATE later_jobs_index AS i SET queue_name = v.q, error_class = v.e"
                    " FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[])"
                    " AS v(q, e, ns, id) WHERE i.namespace = v.ns AND i.job_id = v.id",
                    [queues, errors, namespaces, job_ids],
                )
            else:
                cursor.executemany(
                    "UPDATE later_jobs_index SET queue_name = %s, error_class = %s"
                    " WHERE namespace = %s AND job_id = %s",
                    updates,
                )


class Migration(ReleasedMigration):
    dependencies = [("later_django", "0017_bounded_passes")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="jobindexentry",
                    name="queue_name",
                    field=models.CharField(max_length=200, null=True),
                ),
                migrations.AddField(
                    model_name="jobindexentry",
                    name="error_class",
                    field=models.TextField(null=True),
                ),
            ],
            database_operations=[
                VendorSQL(
                    forwards={"sqlite": ADD_COLUMNS, "postgresql": ADD_COLUMNS},
                    backwards={"sqlite": DROP_COLUMNS, "postgresql": DROP_COLUMNS},
                ),
                migrations.RunPython(backfill, migrations.RunPython.noop),
                VendorSQL(
                    forwards={"sqlite": CREATE_INDEXES, "postgresql": CREATE_INDEXES},
                    backwards={"sqlite": DROP_INDEXES, "postgresql": DROP_INDEXES},
                ),
            ],
        ),
    ]
