"""Rows statements bound positionally (``PositionalRows``, shared by the SQLite and
MySQL drivers): every value lands on its placeholder, whether the row group names only
row fields or mixes in shared values. Pure: no database."""

from __future__ import annotations

from later_django.storage.driver import RowsStatement
from later_django.storage.rows import positional_rows

STATEMENT = RowsStatement(
    sql="INSERT INTO t (ns, a, b, c, at) VALUES {values} ON CONFLICT DO NOTHING -- %(tag)s",
    row="(%(ns)s, %(a)s, %(b)s, %(ns)s, %(c)s, %(at)s)",
)


def test_the_text_in_sqlite3s_own_form() -> None:
    """What runs on a cursor of sqlite3 itself: ``?`` placeholders, and ``%%``
    (Django's escape of a literal ``%``) as ``%``; Django's form is unchanged."""
    compiled = positional_rows(
        RowsStatement(
            sql="INSERT INTO t SELECT * FROM ({values}) WHERE x LIKE '%%s'", row="(%(a)s)"
        )
    )

    assert compiled.sql(2, qmark=True) == "INSERT INTO t SELECT * FROM ((?), (?)) WHERE x LIKE '%s'"
    assert compiled.sql(2) == "INSERT INTO t SELECT * FROM ((%s), (%s)) WHERE x LIKE '%%s'"


def test_shared_names_inside_the_row_group_are_filled_around_the_row_fields() -> None:
    compiled = positional_rows(STATEMENT)
    rows = [{"a": 1, "b": "x", "c": None}, {"a": 2, "b": "y", "c": b"z"}]

    values = compiled.params(rows, {"ns": "N", "at": 7, "tag": "T"})

    assert compiled.sql(2).count("%s") == len(values) == 13
    assert values == ["N", 1, "x", "N", None, 7, "N", 2, "y", "N", b"z", 7, "T"]


def test_a_row_group_of_row_fields_only_is_laid_out_in_order() -> None:
    compiled = positional_rows(
        RowsStatement(sql="INSERT INTO t VALUES {values}", row="(%(a)s, %(b)s)")
    )

    assert compiled.params([{"b": 2, "a": 1}, {"a": 3, "b": 4}], {}) == [1, 2, 3, 4]


def test_a_row_group_of_one_field_and_shared_values() -> None:
    compiled = positional_rows(
        RowsStatement(sql="INSERT INTO t VALUES {values}", row="(%(ns)s, %(a)s)")
    )

    assert compiled.params([{"a": 1}, {"a": 2}], {"ns": "N"}) == ["N", 1, "N", 2]


def test_row_groups_are_joined_by_the_statements_joiner() -> None:
    """MySQL's derived rows: ``SELECT ... UNION ALL SELECT ...``, values still in order."""
    compiled = positional_rows(
        RowsStatement(
            sql="INSERT INTO t SELECT * FROM (SELECT NULL AS a WHERE FALSE UNION ALL {values}) d",
            row="SELECT %(a)s",
            joiner=" UNION ALL ",
        )
    )

    assert compiled.sql(3) == (
        "INSERT INTO t SELECT * FROM (SELECT NULL AS a WHERE FALSE UNION ALL "
        "SELECT %s UNION ALL SELECT %s UNION ALL SELECT %s) d"
    )
    assert compiled.params([{"a": 1}, {"a": 2}, {"a": 3}], {}) == [1, 2, 3]
