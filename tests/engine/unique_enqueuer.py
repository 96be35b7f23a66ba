"""``python -m tests.engine.unique_enqueuer <start-at> <tries> <key>``: a process that, at
the epoch time ``start-at``, enqueues ``tests.engine.tasks.sync_user`` with ``key`` as the
user id ``tries`` times, each in its own ``atomic()``, and prints the job ids it got as
one JSON list. Settings: :mod:`tests.worker.worker_settings` (the test's database)."""

from __future__ import annotations

import json
import sys
import time

import django


def main() -> None:
    start_at, tries, key = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    django.setup()
    from django.db import transaction

    from tests.engine import tasks

    ids = []
    time.sleep(max(0.0, start_at - time.time()))
    for number in range(tries):
        with transaction.atomic():
            ids.append(tasks.sync_user.enqueue(key, note=f"try {number}").id)
    print(json.dumps(ids))


if __name__ == "__main__":
    main()
