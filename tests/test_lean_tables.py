"""Migration 0007: PostgreSQL's hot tables carry their fillfactor and autovacuum
settings, and the claim index no longer holds ``lease_until``; SQLite is unchanged.
Both ways, on both databases (real databases, read from their catalogs)."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.core.management import call_command
from django.db import connections

from tests.test_migrations import released_migrations_run_on

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

LEAN = import_module("later_django.migrations.0007_postgres_lean_tables")
BEFORE = "0006"


def reloptions(alias: str) -> dict[str, dict[str, str]]:
    """``pg_class.reloptions`` of every ``later_*`` table of the current schema."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, c.reloptions FROM pg_class AS c "
            "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
            "AND c.relname LIKE 'later\\_%%'"
        )
        return {
            name: dict(option.split("=", 1) for option in options or [])
            for name, options in cursor.fetchall()
        }


def claim_index_definition(alias: str) -> str:
    connection = connections[alias]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                "AND indexname = 'later_delivery_queue_claim_idx'"
            )
        else:
            cursor.execute(
                "SELECT sql FROM sqlite_master WHERE name = 'later_delivery_queue_claim_idx'"
            )
        (definition,) = cursor.fetchone()
        return definition


def test_every_hot_table_carries_its_options_on_postgres(postgres_alias: str) -> None:
    options = reloptions(postgres_alias)
    for table, expected in LEAN.TABLE_OPTIONS.items():
        assert options[table] == expected, table
    assert options["later_storage"]["fillfactor"] == "70"
    assert options["later_delivery_queue"]["autovacuum_vacuum_scale_factor"] == "0"
    assert options["later_stage_counts"]["fillfactor"] == "10"
    # Tables that are not hot keep the server's settings.
    assert options["later_log_record"] == {}
    assert options["later_topic"] == {}


def test_the_claim_index_leaves_lease_until_out_on_postgres(postgres_alias: str) -> None:
    definition = claim_index_definition(postgres_alias)
    # Led by the queue since migration 0016.
    assert "(namespace, queue_name, priority DESC, sequence) INCLUDE (available_at)" in definition
    assert "lease_until" not in definition


def test_reversing_0007_restores_the_options_and_the_index(db_alias: str) -> None:
    released_migrations_run_on(db_alias)
    vendor = connections[db_alias].vendor
    call_command("migrate", "later_django", "0007", database=db_alias, verbosity=0)
    try:
        at_0007 = claim_index_definition(db_alias)
        call_command("migrate", "later_django", BEFORE, database=db_alias, verbosity=0)
        definition = claim_index_definition(db_alias)
        if vendor == "postgresql":
            assert all(options == {} for options in reloptions(db_alias).values())
            assert "INCLUDE (queue_name, available_at, lease_until)" in definition
        else:
            assert definition == at_0007, "SQLite: 0007 changes nothing"
        call_command("migrate", "later_django", "0007", database=db_alias, verbosity=0)
        if vendor == "postgresql":
            assert (
                reloptions(db_alias)["later_delivery_queue"]
                == LEAN.TABLE_OPTIONS["later_delivery_queue"]
            )
        assert claim_index_definition(db_alias) == at_0007
        assert "lease_until" not in at_0007 or vendor == "sqlite"
    finally:
        call_command("migrate", "later_django", database=db_alias, verbosity=0)
