"""The stores' query classes: statements both vendors run as they are, and the
names of those each vendor spells its own way (annotations without a value,
given by the subclasses in ``storage/postgres/queries`` and ``storage/sqlite/queries``).

Parameters are named (``%(name)s``). Times are bound as epoch milliseconds
(``now``), never read from the database clock, so both vendors and Python agree
on what has expired.
"""

#: The stores with a query module here and one per vendor (``postgres/queries/<name>``,
#: ``sqlite/queries/<name>``); each vendor package imports exactly these.
STORE_QUERY_MODULES = (
    "dashboard",
    "executions",
    "index",
    "kv",
    "leases",
    "log",
    "partitions",
    "queue",
    "task_metrics",
    "topics",
    "upkeep",
)
