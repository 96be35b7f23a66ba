"""``VendorSQL``: a ``RunSQL`` that carries one list of statements per database vendor.

Triggers, partial indexes and covering indexes differ between SQLite and
PostgreSQL, so each migration that creates them names the statements for both.
Each statement is executed on its own (never split by a parser), so trigger
bodies may contain semicolons and ``%`` needs no escaping.
"""

from __future__ import annotations

from typing import Any

from django.db import NotSupportedError, migrations

SUPPORTED_VENDORS = ("sqlite", "postgresql")


class VendorSQL(migrations.RunSQL):
    """Runs ``forwards[vendor]`` on migrate and ``backwards[vendor]`` on unapply."""

    def __init__(
        self,
        forwards: dict[str, list[str]],
        backwards: dict[str, list[str]],
        hints: dict[str, Any] | None = None,
        elidable: bool = False,
    ) -> None:
        for name, statements in (("forwards", forwards), ("backwards", backwards)):
            missing = [vendor for vendor in SUPPORTED_VENDORS if vendor not in statements]
            if missing:
                raise ValueError(f"VendorSQL {name} has no statements for {missing}")
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
    def reversible(self) -> bool:
        return True

    def _statements(self, statements: dict[str, list[str]], schema_editor: Any) -> list[str]:
        vendor = schema_editor.connection.vendor
        if vendor not in statements:
            raise NotSupportedError(
                f"later_django supports the database vendors {SUPPORTED_VENDORS}; "
                f"this database is {vendor!r}"
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
