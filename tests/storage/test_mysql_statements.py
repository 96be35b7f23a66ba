"""Every statement the MySQL driver registers, checked before any store runs it: the
MariaDB server prepares it (a reserved word, a syntax MariaDB lacks, ``LIMIT`` in a
subquery all fail here), and its text avoids what MySQL 8.0 refuses or deprecates but
a MariaDB-only CI cannot see (the survey's step 2, docs/design/mariadb-driver-survey.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import fields

import pytest
from django.db import DatabaseError, connections

from later_django.storage.driver import PLACEHOLDER, Returning, RowsStatement
from later_django.storage.queries.leases import (
    CONSUMER_LEASES,
    PARTITION_LEASES,
    PASS_LEASES,
    LeaseQueries,
)
from later_django.storage.queue import ClaimSteps, heads_statement
from later_django.storage.stores import driver_class
from tests.conftest import use_database

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")
#: Keeps the ``mariadb`` alias in "__all__" (tests/conftest.py).
USES_MARIADB = True

#: Text MySQL 8.0 or MariaDB 10.11 refuses, or MySQL deprecates (survey F1, F7).
FORBIDDEN = {
    "RETURNING": re.compile(r"\bRETURNING\b"),
    "|| (OR on MySQL)": re.compile(r"\|\|"),
    "CAST(... AS INTEGER)": re.compile(r"\bAS INTEGER\b", re.IGNORECASE),
    "VALUES() in an upsert": re.compile(r"\bVALUES\s*\(\s*[a-z_]+\s*\)"),
    "FOR SHARE": re.compile(r"\bFOR SHARE\b"),
    "LATERAL": re.compile(r"\bLATERAL\b"),
    "ON CONFLICT": re.compile(r"\bON CONFLICT\b"),
    "VALUES (...) AS alias (MariaDB 1064)": re.compile(
        r"\bVALUES\s*\((?:[^()]|\([^()]*\))*\)\s+AS\s+\w+"
    ),
    "derived column list AS t(a, b) (MariaDB 1064)": re.compile(r"\bAS\s+\w+\s*\(\w+\s*,"),
    "key unquoted": re.compile(r"(?<![`(])\bkey\b(?![`)])"),
}


def statements() -> Iterator[tuple[str, str]]:
    """``(name, text)`` of every registered MySQL statement (a rows statement for two
    rows, each part of a ``Returning`` apart, each step of the queue's claim and its heads
    of two queues)."""
    for base, queries in driver_class("mysql").query_classes.items():
        instance = queries()
        if isinstance(instance, LeaseQueries):
            yield from lease_statements(instance)
            continue
        for name in sorted(dir(queries)):
            value = getattr(instance, name)
            label = f"{base.__name__}.{name}"
            if isinstance(value, Returning):
                for at, text in enumerate([*filter(None, [value.lock]), *value.writes, value.read]):
                    yield f"{label}[{at}]", text
            elif isinstance(value, RowsStatement):
                for part in ("before", "sql", "read"):
                    text = getattr(value, part)
                    if text:
                        rows = value.joiner.join([value.row] * 2)
                        yield f"{label}.{part}", text.replace("{values}", rows)
            elif isinstance(value, ClaimSteps):
                for step in ("served", "head", "take"):
                    yield f"{label}.{step}", getattr(value, step)
                yield f"{label}.heads", heads_statement(value.head, 2)
            elif isinstance(value, str) and not name.startswith("_") and " " in value:
                yield label, value


def lease_statements(queries: LeaseQueries) -> Iterator[tuple[str, str]]:
    """The lease statements of every lease table, built by ``queries.of``."""
    for table in (PARTITION_LEASES, CONSUMER_LEASES, PASS_LEASES):
        built = queries.of(table)
        for field in fields(built):
            value = getattr(built, field.name)
            label = f"LeaseQueries.{field.name}[{table.name}]"
            if isinstance(value, Returning):
                for at, text in enumerate([*value.writes, value.read]):
                    yield f"{label}[{at}]", text
            elif value:
                yield label, value


ALL = list(statements())


def test_the_kv_statements_are_all_there() -> None:
    names = {name.split("[")[0].split(".")[1] for name, _ in ALL}
    assert {"get", "set_many", "set_if_absent", "replace_if", "decrement_many"} <= names


@pytest.mark.parametrize(("name", "text"), ALL, ids=[name for name, _ in ALL])
def test_no_text_mysql_refuses(name: str, text: str) -> None:
    found = [what for what, pattern in FORBIDDEN.items() if pattern.search(text)]
    assert found == [], f"{name}: {found}"


@pytest.mark.parametrize(("name", "text"), ALL, ids=[name for name, _ in ALL])
def test_no_write_reads_its_own_table_in_a_subquery(name: str, text: str) -> None:
    """MySQL (not MariaDB) refuses a DELETE or UPDATE whose subquery reads the table
    it writes (error 1093)."""
    if not re.match(r"(DELETE|UPDATE)\b", text):
        return
    target = re.search(r"\blater_\w+", text)
    assert target is not None, name
    subqueries = re.findall(r"\(SELECT\b[^()]*?\bFROM\s+(later_\w+)", text)
    assert target.group() not in subqueries, name


def refusal(alias: str, text: str) -> str | None:
    """What the server says when it is asked to prepare ``text`` (its placeholders as
    ``?``): None when it prepared it, else its error."""
    with connections[alias].cursor() as cursor:
        try:
            cursor.execute("PREPARE later_statement_lint FROM %s", [PLACEHOLDER.sub("?", text)])
        except DatabaseError as error:
            return str(error)
        cursor.execute("DEALLOCATE PREPARE later_statement_lint")
    return None


@pytest.mark.parametrize(("name", "text"), ALL, ids=[name for name, _ in ALL])
def test_mariadb_prepares_it(request: pytest.FixtureRequest, name: str, text: str) -> None:
    alias = use_database(request, "mariadb")
    assert refusal(alias, text) is None, name


def test_mariadb_refuses_a_statement_it_cannot_parse(request: pytest.FixtureRequest) -> None:
    """The check above can fail: ``key`` unquoted (a reserved word) is refused."""
    alias = use_database(request, "mariadb")
    refused = refusal(alias, "SELECT key FROM later_storage WHERE key = %(key)s")
    assert refused is not None and "1064" in refused, refused


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("SELECT key FROM later_storage WHERE key = %(key)s", "key unquoted"),
        ("UPDATE t SET a = 1 WHERE b = 2 RETURNING a", "RETURNING"),
        ("SELECT 'a' || 'b'", "|| (OR on MySQL)"),
        ("SELECT CAST(x AS INTEGER)", "CAST(... AS INTEGER)"),
        (
            "INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a)",
            "VALUES() in an upsert",
        ),
        (
            "INSERT INTO t (a) VALUES (%(a)s) AS new ON DUPLICATE KEY UPDATE a = new.a",
            "VALUES (...) AS alias (MariaDB 1064)",
        ),
        (
            "SELECT * FROM (SELECT 1, 2) AS new(a, b)",
            "derived column list AS t(a, b) (MariaDB 1064)",
        ),
    ],
)
def test_the_text_checks_catch_what_they_name(text: str, what: str) -> None:
    assert FORBIDDEN[what].search(text)


def test_the_own_table_check_catches_a_subquery_on_the_written_table() -> None:
    with pytest.raises(AssertionError):
        test_no_write_reads_its_own_table_in_a_subquery(
            "bad", "DELETE FROM later_storage WHERE `key` IN (SELECT `key` FROM later_storage)"
        )
