"""A MySQL claim whose ``COMMIT`` went through unheard (issue 36).

MariaDB's ``KILL CONNECTION`` shuts the session's socket at once: a ``COMMIT`` in
progress completes and the client reads ``2013 Lost connection``. ``make chaos``'s
``mariadb_kill`` cell hit it on claims: the messages stayed leased to a worker that
did not know it had them until the lease lapsed. A claim in steps chooses its
messages before it leases them, so the error it raises names them
(``claim_in_doubt``) and the worker hands them back (a nack by owner, which changes
nothing when the claim did not commit). On the ``mariadb`` alias.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import OperationalError, connections

from later_django.storage.queue import claim_in_doubt
from later_django.storage.stores import stores_for
from tests.conftest import use_database

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True


@pytest.fixture
def mariadb(request: pytest.FixtureRequest) -> str:
    return use_database(request, "mariadb")


def test_a_claim_committed_unheard_names_its_messages_to_hand_back(
    mariadb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    namespace = f"ns-{uuid.uuid4().hex[:12]}"
    queue = stores_for(mariadb).queue
    published = queue.publish(namespace, "default", [b"a", b"b"])
    connection = connections[mariadb]
    committed = connection._commit

    def commit_then_lose_the_answer() -> Any:
        committed()
        raise OperationalError(2013, "Lost connection to server during query")

    monkeypatch.setattr(connection, "_commit", commit_then_lose_the_answer)
    with pytest.raises(OperationalError) as raised:
        queue.claim(namespace, ["default"], "worker-a", 60_000, batch_size=2)
    monkeypatch.undo()

    in_doubt = claim_in_doubt(raised.value)
    assert sorted(in_doubt) == sorted(published)
    # It did commit: leased to worker-a, no one else can claim them ...
    assert queue.claim(namespace, ["default"], "worker-b", 60_000, batch_size=2) == []
    # ... until worker-a hands them back.
    assert queue.nack("worker-a", in_doubt) == 2
    again = queue.claim(namespace, ["default"], "worker-b", 60_000, batch_size=2)
    assert sorted(message.sequence for message in again) == sorted(published)
