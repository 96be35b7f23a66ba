"""Reading job records from storage: the decode step that logs and skips bad bytes."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from later_django.core.keys import job_key
from later_django.core.records import JobRecord, decode_record
from later_django.exceptions import RecordDecodeError
from later_django.storage.ports.kv import KeyValuePort

logger = logging.getLogger("later_django.engine")


def read_records(
    kv: KeyValuePort, namespace: str, job_ids: Iterable[str], *, for_update: bool = False
) -> dict[str, JobRecord]:
    """The decoded records of those of ``job_ids`` that exist, by job id, read in one
    statement from ``kv`` (with row locks when ``for_update``). A record that
    cannot be decoded is logged and left out: the worker that meets its message
    fails the job with the reason."""
    records, undecodable = read_records_and_errors(kv, namespace, job_ids, for_update=for_update)
    for job_id, error in undecodable.items():
        logger.error("job %s: %s; left for a worker to fail", job_id, error)
    return records


def read_records_and_errors(
    kv: KeyValuePort, namespace: str, job_ids: Iterable[str], *, for_update: bool = False
) -> tuple[dict[str, JobRecord], dict[str, RecordDecodeError]]:
    """:func:`read_records`, with the records that cannot be decoded returned (job id ->
    the decode error) instead of logged: an ``id`` in neither map has no record."""
    keys = {job_key(namespace, job_id): job_id for job_id in job_ids}
    read = kv.get_many_for_update if for_update else kv.get_many
    records: dict[str, JobRecord] = {}
    undecodable: dict[str, RecordDecodeError] = {}
    for key, raw in read(list(keys)).items():
        try:
            records[keys[key]] = decode_record(raw)
        except RecordDecodeError as error:
            undecodable[keys[key]] = error
    return records, undecodable
