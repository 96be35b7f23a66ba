"""Whether the test PostgreSQL answers, asked once with a short timeout."""

import dj_database_url


def postgres_problem(url: str) -> str | None:
    """Returns why ``url`` cannot be reached, or ``None`` when a server answers."""
    try:
        import psycopg
    except ImportError as error:  # the postgres extra is not installed
        return f"psycopg is not installed ({error})"
    config = dj_database_url.parse(url)
    try:
        with psycopg.connect(
            host=config.get("HOST") or None,
            port=config.get("PORT") or None,
            user=config.get("USER") or None,
            password=config.get("PASSWORD") or None,
            dbname=config.get("NAME") or None,
            connect_timeout=3,
        ):
            return None
    except psycopg.Error as error:
        return str(error).strip() or type(error).__name__


def mariadb_problem(url: str) -> str | None:
    """Returns why the MariaDB/MySQL server of ``url`` cannot be reached, or ``None``
    when one answers (the database of ``url`` need not exist: tests make their own)."""
    try:
        import MySQLdb
    except ImportError as error:  # the mysql extra is not installed
        return f"mysqlclient is not installed ({error})"
    config = dj_database_url.parse(url)
    try:
        MySQLdb.connect(
            host=config.get("HOST") or "127.0.0.1",
            port=int(config.get("PORT") or 3306),
            user=config.get("USER") or "root",
            password=config.get("PASSWORD") or "",
            connect_timeout=3,
        ).close()
        return None
    except MySQLdb.Error as error:
        return str(error).strip() or type(error).__name__
