"""Delivery-queue messages: what a worker is asked to do, as MessagePack.

A message is a small map with a command tag ``c``. Decoding never executes
anything and never unpickles: unknown tags and malformed bytes raise
:class:`~later_django.exceptions.RecordDecodeError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import msgpack

from later_django.core.records import pack, packer_of_thread
from later_django.exceptions import RecordDecodeError


@dataclass(frozen=True)
class ExecuteJob:
    """Run the job ``job_id`` (its record names the task ``payload_type``)."""

    job_id: str
    payload_type: str


#: What a delivery message can ask; the one command today. Decoding refuses any other
#: tag, so a message of another kind (a newer release's) is dropped, never run.
DeliveryCommand = ExecuteJob


def _execute_job_body(job_id: str, payload_type: str) -> dict[str, str]:
    """The one spelling of an :class:`ExecuteJob` message before packing."""
    return {"c": "job", "id": job_id, "t": payload_type}


def encode_command(command: DeliveryCommand) -> bytes:
    """The MessagePack bytes of ``command``."""
    match command:
        case ExecuteJob(job_id, payload_type):
            return pack(_execute_job_body(job_id, payload_type))
        case _:
            raise TypeError(f"not a delivery command: {command!r}")


def execute_job_payloads(jobs: Iterable[tuple[str, str]]) -> list[bytes]:
    """``encode_command(ExecuteJob(job_id, payload_type))`` of each ``(job_id,
    payload_type)`` of ``jobs``: one packer call per message (a batch's)."""
    packer = packer_of_thread()
    return [packer.pack(_execute_job_body(job_id, kind)) for job_id, kind in jobs]


def decode_command(payload: bytes) -> DeliveryCommand:
    """The command in ``payload``; raises ``RecordDecodeError`` when it is not one."""
    try:
        body = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except Exception as error:  # msgpack raises several unrelated types
        raise RecordDecodeError(f"queue message is not valid MessagePack: {error}") from error
    if not isinstance(body, dict):
        raise RecordDecodeError(f"queue message must be a map, got {type(body).__name__}")
    try:
        match body.get("c"):
            case "job":
                return ExecuteJob(job_id=str(body["id"]), payload_type=str(body["t"]))
    except KeyError as error:
        raise RecordDecodeError(f"queue message {body!r} lacks the field {error}") from None
    raise RecordDecodeError(f"queue message has unknown command {body.get('c')!r}")
