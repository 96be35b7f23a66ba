"""The black-box fault suite of later_django (``make chaos``, ``python -m chaos``).

Real ``later_worker`` processes, real SQLite WAL files and real PostgreSQL
servers are put through faults (SIGKILL, restarts, killed connections, pinned
snapshots, lock storms, poison jobs, exhausted connection slots) while enqueuer
processes keep a steady load; every committed job is then counted exactly from
the ledger the chaos task writes. See docs/reliability.md.

Layout: the controller (``chaos.__main__``, ``chaos.cells``, ``chaos.harness``)
never imports Django; everything that touches Django runs in child processes
configured by :mod:`chaos.settings` (the workers, and ``python -m chaos.agent``).
"""
