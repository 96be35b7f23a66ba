"""Delivery-queue messages round-trip through MessagePack; anything else is refused."""

from __future__ import annotations

import msgpack
import pytest

from later_django.core.commands import ExecuteJob, decode_command, encode_command
from later_django.exceptions import RecordDecodeError


def test_the_job_command_round_trips() -> None:
    command = ExecuteJob("01JOB", "shop.tasks.send")
    assert decode_command(encode_command(command)) == command


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\xc1", "not valid MessagePack"),
        (msgpack.packb([1, 2]), "must be a map"),
        (msgpack.packb({"c": "pickle", "data": "x"}), "unknown command 'pickle'"),
        # Tags of commands earlier designs had and never published.
        (msgpack.packb({"c": "partition", "topic": "orders"}), "unknown command 'partition'"),
        (msgpack.packb({"c": "maintenance", "pass": "sweep"}), "unknown command 'maintenance'"),
        (msgpack.packb({"c": "job", "id": "x"}), "lacks the field 't'"),
    ],
)
def test_a_message_that_is_not_a_command_is_refused_with_the_reason(payload, reason) -> None:
    with pytest.raises(RecordDecodeError, match=reason):
        decode_command(payload)
