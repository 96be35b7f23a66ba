"""Per-vendor migration SQL (``VendorSQL``) and the vendors each migration was written for.

Triggers, partial and covering indexes differ between SQLite, PostgreSQL and
MySQL/MariaDB, so each migration that creates them names the statements for every
vendor. Each statement is executed on its own (never split by a parser), so trigger
bodies may contain semicolons and ``%`` needs no escaping.

Migrations 0001-0018 were released before later_django knew MySQL (Django's vendor
``"mysql"``, which MariaDB is too): they are :class:`ReleasedMigration`, written for
:data:`RELEASED_VENDORS`. On another vendor such a migration changes only Django's
migration state (as ``migrate --fake`` would for it) and runs nothing;
``0019_mysql_schema`` builds on MySQL the schema they build, MySQL's way (decision
212). From 0019 on, a migration is a plain ``Migration`` that runs on every vendor,
and each of its ``VendorSQL`` names every vendor of :data:`SUPPORTED_VENDORS`
(an empty list where a vendor needs nothing); ``tests/test_mysql_schema.py`` holds
every migration to that.
"""

from __future__ import annotations

from typing import Any

from django.db import NotSupportedError, migrations

#: Every database vendor later_django's migrations build a schema on.
SUPPORTED_VENDORS = ("sqlite", "postgresql", "mysql")
#: The vendors of the released migrations 0001-0018.
RELEASED_VENDORS = ("sqlite", "postgresql")


class ReleasedMigration(migrations.Migration):
    """A migration released for :data:`RELEASED_VENDORS` only.

    On those vendors it runs as it always did (``Migration.apply``/``unapply``,
    untouched). On any other vendor its operations move the migration state and
    touch no table: a later migration builds that vendor's schema whole.
    """

    vendors: tuple[str, ...] = RELEASED_VENDORS

    def apply(self, project_state: Any, schema_editor: Any, collect_sql: bool = False) -> Any:
        if schema_editor.connection.vendor in self.vendors:
            return super().apply(project_state, schema_editor, collect_sql)
        for operation in self.operations:
            operation.state_forwards(self.app_label, project_state)
        return project_state

    def unapply(self, project_state: Any, schema_editor: Any, collect_sql: bool = False) -> Any:
        if schema_editor.connection.vendor in self.vendors:
            return super().unapply(project_state, schema_editor, collect_sql)
        return project_state


class VendorSQL(migrations.RunSQL):
    """Runs ``forwards[vendor]`` on migrate and ``backwards[vendor]`` on unapply.

    Both dicts name the same vendors, at least :data:`RELEASED_VENDORS` (what the
    released migrations name); a migration run on a vendor its ``VendorSQL`` does
    not name stops with ``NotSupportedError``, so a missing vendor is never a silent
    no-op.
    """

    def __init__(
        self,
        forwards: dict[str, list[str]],
        backwards: dict[str, list[str]],
        hints: dict[str, Any] | None = None,
        elidable: bool = False,
    ) -> None:
        for name, statements in (("forwards", forwards), ("backwards", backwards)):
            missing = [vendor for vendor in RELEASED_VENDORS if vendor not in statements]
            if missing:
                raise ValueError(f"VendorSQL {name} has no statements for {missing}")
            unknown = [vendor for vendor in statements if vendor not in SUPPORTED_VENDORS]
            if unknown:
                raise ValueError(f"VendorSQL {name} names unknown vendors {unknown}")
        if set(forwards) != set(backwards):
            raise ValueError(
                f"VendorSQL forwards name {sorted(forwards)}, backwards {sorted(backwards)}"
            )
        self.forwards = forwards
        self.backwards = backwards
        super().__init__(sql=[], reverse_sql=[], hints=hints, elidable=elidable)

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs: dict[str, Any] = {"forwards": self.forwards, "backwards": self.backwards}
        if self.hints:
            kwargs["hints"] = self.hints
        if self.elidable:
            kwargs["elidable"] = self.elidable
        return (self.__class__.__qualname__, [], kwargs)

    @property
    def vendors(self) -> tuple[str, ...]:
        """The vendors this operation has statements for."""
        return tuple(self.forwards)

    @property
    def reversible(self) -> bool:
        return True

    def _statements(self, statements: dict[str, list[str]], schema_editor: Any) -> list[str]:
        vendor = schema_editor.connection.vendor
        if vendor not in statements:
            raise NotSupportedError(
                f"later_django supports the database vendors {SUPPORTED_VENDORS}; this "
                f"migration has statements for {tuple(statements)}, this database is {vendor!r}"
            )
        return statements[vendor]

    def database_forwards(self, app_label, schema_editor, from_state, to_state) -> None:
        if self._allowed(app_label, schema_editor):
            for statement in self._statements(self.forwards, schema_editor):
                schema_editor.execute(statement, params=None)

    def database_backwards(self, app_label, schema_editor, from_state, to_state) -> None:
        if self._allowed(app_label, schema_editor):
            for statement in self._statements(self.backwards, schema_editor):
                schema_editor.execute(statement, params=None)

    def _allowed(self, app_label: str, schema_editor: Any) -> bool:
        from django.db import router

        return router.allow_migrate(schema_editor.connection.alias, app_label, **self.hints)

    def describe(self) -> str:
        return "Vendor-specific SQL (triggers and indexes)"
