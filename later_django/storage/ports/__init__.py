"""The storage ports: what the engine, the worker and the surfaces may ask of storage.

One ``typing.Protocol`` per store, each in the module named after the store it
describes: ``kv`` (``KeyValuePort``), ``job_index`` (``JobIndexPort``), ``metrics``
(``MetricsPort``), ``upkeep`` (``UpkeepPort``), ``execution`` (``ExecutionPort``),
``queue`` (``QueuePort``), ``partitions`` (``PartitionPort``), ``leases``
(``LeasePort``, the one fenced lease), ``log`` (``LogPort``), ``dashboard``
(``DashboardPort``) and ``topics`` (``TopicPort``). The value types they take and
return live in ``storage.types`` and in the store modules. This package exports
nothing itself: import a port from its module.

The ``Stores`` bundle (``storage.stores``) types its members with these ports, so the
code above storage depends on the ports and not on a vendor or an implementation;
mypy checks that each store satisfies its port where ``stores_for`` builds the
bundle, and ``tests/storage/test_ports.py`` runs every port's implementation on both
drivers. The write batch's statement parts (``*_part``) are not in the ports: only
``storage.batch`` combines them.

Contracts shared by every port: each method runs on the connection of the
bundle's alias and joins the caller's transaction when there is one (a write
commits or rolls back with the caller's data); a method documented as atomic
opens its own transaction (a savepoint inside the caller's); times are epoch
milliseconds; bad arguments raise ``ValueError``/``TypeError`` naming the value
before anything is written.
"""
