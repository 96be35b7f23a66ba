"""Delivery-queue round trips: how fast consumers can claim and ack, with no job work.

Publishes ``LATER_BENCH_MESSAGES`` (default 20,000) messages in batches of 1,000
(``publish_per_s``), then starts ``--consumers`` processes (default 2) that each
claim batches of 16 and ack them until the queue is empty (``drain_per_s``, wall
time from the consumers' start to the last ack). This bounds what the job worker
can reach: every job costs at least one claim and one ack. One JSON line per
figure with keys ``scenario``, ``db``, ``value``, ``unit``.

    .venv/bin/python bench/queue_roundtrip.py --db sqlite
    .venv/bin/python bench/queue_roundtrip.py --db postgres --consumers 2

PostgreSQL comes from ``LATER_BENCH_DATABASE_URL`` (default
``postgres://root@127.0.0.1:5432/later_bench``, created when missing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.django_setup import configure_django

NAMESPACE = "bench"
QUEUE = "default"
PUBLISH_BATCH = 1_000


def consume(owner: str) -> int:
    """Claims and acks until a claim comes back empty twice; returns messages acked."""
    from later_django.storage.stores import stores_for

    queue = stores_for("default").queue
    acked, empty = 0, 0
    while empty < 2:
        batch = queue.claim(NAMESPACE, [QUEUE], owner, lease_ms=30_000)
        if not batch:
            empty += 1
            time.sleep(0.01)
            continue
        empty = 0
        acked += queue.ack(owner, [message.sequence for message in batch])
    return acked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--consumer", help=argparse.SUPPRESS)
    parser.add_argument("--sqlite-path", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.consumer:
        configure_django(args.db, args.sqlite_path, rebuild_tables=False)
        print(consume(args.consumer), flush=True)
        return

    messages = int(os.environ.get("LATER_BENCH_MESSAGES", "20000"))
    with tempfile.TemporaryDirectory(prefix="later-bench-") as directory:
        sqlite_path = str(Path(directory) / "queue.sqlite3")
        configure_django(args.db, sqlite_path, rebuild_tables=True)
        from later_django.storage.stores import stores_for

        queue = stores_for("default").queue
        started = time.perf_counter()
        for start in range(0, messages, PUBLISH_BATCH):
            count = min(PUBLISH_BATCH, messages - start)
            queue.publish(NAMESPACE, QUEUE, [b"\x81\xa1c\xa3job"] * count)
        publish_s = time.perf_counter() - started

        command = [sys.executable, __file__, "--db", args.db, "--sqlite-path", sqlite_path]
        started = time.perf_counter()
        consumers = [
            subprocess.Popen([*command, "--consumer", f"consumer-{n}"], stdout=subprocess.PIPE)
            for n in range(args.consumers)
        ]
        acked = [int(process.communicate()[0]) for process in consumers]
        # The consumers wait out two empty claims (~20 ms) before they stop.
        drain_s = time.perf_counter() - started
        if sum(acked) != messages:
            raise SystemExit(f"acked {sum(acked)} of {messages} messages")
        for scenario, value, unit in (
            ("publish", messages / publish_s, "messages/s"),
            ("claim_ack_drain", messages / drain_s, "messages/s"),
        ):
            print(
                json.dumps(
                    {
                        "scenario": scenario,
                        "db": args.db,
                        "value": round(value),
                        "unit": unit,
                        "messages": messages,
                        "consumers": args.consumers,
                        "per_consumer": acked if scenario != "publish" else None,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
