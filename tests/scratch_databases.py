"""A PostgreSQL (or MariaDB) database of a test's own, on the test server, for a project
the test runs in subprocesses (the example project, the Wagtail site, an installed wheel)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit


@contextlib.contextmanager
def scratch_database(suffix: str) -> Iterator[str]:
    """An empty database ``<this run's test database>_<suffix>`` made for the block and
    dropped after it (also one a killed run left behind first); yields its URL. The
    name is per pytest process (``LATER_TEST_PG_NAME``, the xdist worker), so parallel
    runs never share one. Needs the ``postgres`` alias (the caller skips without it)."""
    import psycopg
    from django.conf import settings

    config = settings.DATABASES["postgres"]
    name = f"{config['TEST']['NAME']}_{suffix}"
    server = urlsplit(settings.POSTGRES_URL)
    with psycopg.connect(
        host=config["HOST"] or None,
        port=config["PORT"] or None,
        user=config["USER"] or None,
        password=config["PASSWORD"] or None,
        dbname=config["NAME"],
        autocommit=True,
    ) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield urlunsplit(server._replace(path=f"/{name}"))
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def mariadb_scratch_database(suffix: str) -> Iterator[str]:
    """As :func:`scratch_database`, on the MariaDB server (``utf8mb4``): an empty
    database ``<this run's MariaDB test database>_<suffix>`` for the block, dropped
    after it; yields its URL (with ``charset=utf8mb4``). Needs the ``mariadb`` alias."""
    import MySQLdb
    from django.conf import settings

    config = settings.DATABASES["mariadb"]
    name = f"{config['TEST']['NAME']}_{suffix}"
    server = urlsplit(settings.MARIADB_URL)
    admin = MySQLdb.connect(
        host=config["HOST"] or "127.0.0.1",
        port=int(config["PORT"] or 3306),
        user=config["USER"] or "root",
        password=config["PASSWORD"] or "",
        autocommit=True,
    )
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        try:
            yield urlunsplit(server._replace(path=f"/{name}", query="charset=utf8mb4"))
        finally:
            with admin.cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        admin.close()
