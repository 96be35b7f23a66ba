"""Results passed to children: ``context.parent_results`` of a ``takes_context`` task.

A child (``continue_with`` or ``api.after``) reads its parents' return values where
they are stored, in the parents' own records: nothing is copied into the child. The
read is lazy: :class:`ParentResults` reads every parent's record in one statement the
first time the task looks into it, so a child that never asks costs nothing more at
its start. The sweep keeps the records of parents whose children have not finished
(:mod:`later_django.engine.parent_holds`), past their retention too, so the read
includes values past their expiry the sweep has not deleted
(``KeyValuePort.get_many_unswept``).

A parent whose record is gone anyway (deleted by an operator) raises
:class:`~later_django.exceptions.ParentResultMissing` naming it, never a silent
``None``: the worker fails the job at once, without retry (the record will not come
back). A parent that failed or was cancelled (the child of ``on="finish"``) has the
result ``None``: it returned nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from later_django.core.keys import job_key
from later_django.core.records import JobRecord, decode_record
from later_django.exceptions import ParentResultMissing, RecordDecodeError
from later_django.storage.ports.kv import KeyValuePort


def parent_ids_of(record: JobRecord) -> tuple[str, ...]:
    """The parents of ``record`` in the order they were given: a fan-in child's
    ``parent_job_ids``, a ``continue_with`` child's one ``parent_job_id``, else none."""
    if record.parent_job_ids:
        return tuple(record.parent_job_ids)
    if record.parent_job_id is not None:
        return (record.parent_job_id,)
    return ()


class ParentResults(Mapping[str, Any]):
    """A read-only mapping parent job id -> its return value, in the order the parents
    were given. Read on first use (``len``, iteration, ``in`` and ``[]`` all read), in
    one statement on ``kv``, the thread's database connection; raises
    ``ParentResultMissing`` for a parent whose record is gone (then again at each use)."""

    def __init__(self, kv: KeyValuePort | None, namespace: str, parent_ids: tuple[str, ...]):
        self._kv = kv
        self._namespace = namespace
        self._ids = parent_ids
        self._values: dict[str, Any] | None = None

    def _read(self) -> dict[str, Any]:
        if self._values is not None:
            return self._values
        if not self._ids:
            self._values = {}
            return self._values
        if self._kv is None:
            raise ParentResultMissing("this job's parents cannot be read here (no storage)")
        keys = {parent: job_key(self._namespace, parent) for parent in self._ids}
        raws = self._kv.get_many_unswept(list(keys.values()))
        values: dict[str, Any] = {}
        for parent, key in keys.items():
            raw = raws.get(key)
            if raw is None:
                raise ParentResultMissing(
                    f"parent {parent}'s record is gone: its result cannot be passed "
                    "(deleted, or swept)"
                )
            try:
                values[parent] = decode_record(raw).return_value
            except RecordDecodeError as error:
                raise ParentResultMissing(
                    f"parent {parent}'s record cannot be decoded ({error}): "
                    "its result cannot be passed"
                ) from error
        self._values = values
        return values

    def __getitem__(self, parent_id: str) -> Any:
        return self._read()[parent_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())

    def __repr__(self) -> str:
        if self._values is None:
            return f"<ParentResults of {list(self._ids)} (not read yet)>"
        return f"<ParentResults {self._values!r}>"
