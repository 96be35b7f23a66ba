"""A start write that committed though the worker never heard it did.

MariaDB's ``KILL CONNECTION`` shuts the session's socket at once: a ``COMMIT`` in
progress completes and its answer is lost (``2013 Lost connection to server during
query``); ``make chaos``'s ``mariadb_kill`` cell hit it (docs/reliability.md). Any
connection cut between a commit and its answer does the same elsewhere. The worker
then writes the batch's start again (``BatchStart.commit_again``, decision 112):
the jobs already run under the first write, so nothing must change. Planned again,
the stored ``running`` record read as an attempt lost under this very claim: the job
was requeued while it ran, its outcome dropped, and it ran a second time.
"""

from __future__ import annotations

import pytest

from later_django.core.keys import job_key
from later_django.core.records import decode_record
from later_django.engine.execution.start import plan_batch
from later_django.storage.stores import stores_for
from tests.engine import tasks
from tests.engine.support import NAMESPACE
from tests.engine.test_start_write import _options

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_writing_again_a_start_that_committed_changes_nothing(engine_db: str) -> None:
    stores = stores_for(engine_db)
    enqueued = tasks.add.enqueue(1, 2)
    messages = stores.queue.claim(NAMESPACE, ["default"], "planner", 30_000, batch_size=1)
    start = plan_batch(messages, **_options(stores))
    start.commit()  # it committed; the worker saw an error instead of its answer
    written = stores.kv.get(job_key(NAMESPACE, enqueued.id))

    launch, abandon = start.commit_again()

    assert (launch, abandon) == ([], [])
    assert stores.kv.get(job_key(NAMESPACE, enqueued.id)) == written
    stored = decode_record(written)
    assert (stored.stage, stored.attempts) == ("running", 1)
