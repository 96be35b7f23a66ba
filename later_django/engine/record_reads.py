"""Reading job records from storage: the decode step that logs and skips bad bytes."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from later_django.core.keys import job_key
from later_django.core.records import JobRecord, decode_record
from later_django.exceptions import RecordDecodeError
from later_django.storage.ports import KeyValuePort

logger = logging.getLogger("later_django.engine")


def read_records(
    kv: KeyValuePort, namespace: str, job_ids: Iterable[str], *, for_update: bool = False
) -> dict[str, JobRecord]:
    """The decoded records of those of ``job_ids`` that exist, by job id, read in one
    statement from ``kv`` (with row locks when ``for_update``). A record that
    cannot be decoded is logged and left out: the worker that meets its message
    fails the job with the reason."""
    keys = {job_key(namespace, job_id): job_id for job_id in job_ids}
    read = kv.get_many_for_update if for_update else kv.get_many
    records: dict[str, JobRecord] = {}
    for key, raw in read(list(keys)).items():
        try:
            records[keys[key]] = decode_record(raw)
        except RecordDecodeError as error:
            logger.error("job %s: %s; left for a worker to fail", keys[key], error)
    return records
