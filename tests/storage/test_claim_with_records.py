"""The claim reads the job records too, on PostgreSQL (migration 0008).

Each claimed message carries the key of the record its payload names and that
record's live value; a payload of any other shape gets no key. SQLite's claim
reads no record (its read costs no round trip), nor does MySQL's (its claim's rows
are built from its locking read: ``storage.queue.ClaimSteps``).
"""

from __future__ import annotations

import time
import uuid

import msgpack
import pytest
from django.db import connections

from later_django.core.commands import ExecuteJob, encode_command
from later_django.core.keys import job_key
from later_django.storage.stores import stores_for
from later_django.storage.types import Set
from tests.storage import three_databases

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True
#: This module's own fixture over the three databases (tests/storage/three_databases.py).
db_alias = three_databases.db_alias

OWNER = "claimer"


@pytest.fixture
def namespace() -> str:
    return f"ns{uuid.uuid4().hex[:12]}"


def claim_all(alias: str, namespace: str, count: int) -> dict[bytes, object]:
    """Every message published (``count``, all ready), claimed: payload -> record hint."""
    claimed = stores_for(alias).queue.claim(namespace, ["q"], OWNER, 30_000, batch_size=count)
    assert len(claimed) == count
    return {message.payload: message.record for message in claimed}


def test_a_claimed_job_message_carries_its_record_on_postgres(
    db_alias: str, namespace: str
) -> None:
    stores = stores_for(db_alias)
    live = encode_command(ExecuteJob("01J0000000000000000000LIVE", "t.task"))
    gone = encode_command(ExecuteJob("01J0000000000000000000GONE", "t.task"))
    expired = encode_command(ExecuteJob("01J000000000000000000EXPIRE", "t.task"))
    stores.kv.apply([Set(job_key(namespace, "01J0000000000000000000LIVE"), b"record")])
    stores.kv.apply([Set(job_key(namespace, "01J000000000000000000EXPIRE"), b"old", 0.001)])
    time.sleep(0.01)
    stores.queue.publish(namespace, "q", [live, gone, expired])

    hints = claim_all(db_alias, namespace, 3)

    if connections[db_alias].vendor != "postgresql":
        assert set(hints.values()) == {None}
        return
    assert hints[live] == (job_key(namespace, "01J0000000000000000000LIVE"), b"record")
    assert hints[gone] == (job_key(namespace, "01J0000000000000000000GONE"), None)
    assert hints[expired] == (job_key(namespace, "01J000000000000000000EXPIRE"), None)


def test_a_payload_of_another_shape_gets_no_key(postgres_alias: str, namespace: str) -> None:
    """Keys in another order, a short or empty payload, a truncated id: no key,
    never an error. An id with bytes that ``escape`` rewrites gets a key that is
    not the job's (the reader then reads the record itself)."""
    reordered = msgpack.packb({"id": "01J0000000000000000000LIVE", "c": "job", "t": "t"})
    odd_id = encode_command(ExecuteJob("x\xff\\y", "t"))
    truncated = encode_command(ExecuteJob("01J0000000000000000000LIVE", "t"))[:20]
    payloads = [reordered, b"\x83", b"", b"\x83\xa1c\xa3job\xa2id\xba", truncated, odd_id]
    stores_for(postgres_alias).queue.publish(namespace, "q", payloads)

    hints = claim_all(postgres_alias, namespace, len(payloads))

    assert [hints[payload] for payload in payloads[:5]] == [None] * 5
    key, value = hints[odd_id]
    assert key != job_key(namespace, "x\xff\\y")
    assert value is None


@pytest.mark.parametrize("function", ["later_claim_with_records", "later_claim_counted"])
def test_the_claim_with_records_keeps_the_claims_pinned_plan(
    postgres_alias: str, function: str
) -> None:
    """0008's claim (kept for workers of the previous release) and 0014's, which the
    worker calls, both pin the ordered walk of the claim index."""
    with connections[postgres_alias].cursor() as cursor:
        cursor.execute("SELECT proconfig FROM pg_proc WHERE proname = %s", [function])
        (function_settings,) = cursor.fetchone()
    assert sorted(function_settings) == ["enable_bitmapscan=off", "enable_seqscan=off"]
