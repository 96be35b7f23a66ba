"""Conformance of ``LeasePort.ensure`` and ``LeasePort.hold`` on SQLite and PostgreSQL.

Both are for lease tables with one slot column: the consumer-group leases of a retained
log (``stores_for(alias).log.leases``, scope ``(namespace, group, topic)``, slot: the
partition)."""

from __future__ import annotations

import pytest

from later_django.storage.leases import Lease
from later_django.storage.stores import stores_for

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

SCOPE = ("ns", "g", "events")
OTHER_SCOPE = ("ns", "h", "events")
T = 1_000_000


def state(db_alias: str, scope: tuple = SCOPE) -> dict[int, tuple]:
    """partition -> (owner, until, epoch) of every lease row of ``scope``."""
    leases = stores_for(db_alias).log.leases.leases(scope)
    return {slot[0]: (lease.owner, lease.until_ms, lease.epoch) for slot, lease in leases.items()}


# --- ensure ---


def test_ensure_creates_free_rows_at_epoch_zero(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    assert leases.leases(SCOPE) == {}
    leases.ensure(SCOPE, [2, 0, 1])
    assert leases.leases(SCOPE) == {(p,): Lease((p,), None, 0, 0) for p in range(3)}
    assert leases.leases(OTHER_SCOPE) == {}


def test_ensure_leaves_existing_rows_as_they_are(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0, 1])
    assert leases.take(SCOPE, "m", [(0,)], until_ms=T + 500, now_ms=T) == {(0,): 1}
    leases.release(SCOPE, "m", [(0,)])
    assert leases.take(SCOPE, "n", [(0,)], until_ms=T + 700, now_ms=T) == {(0,): 2}
    leases.ensure(SCOPE, [0, 1, 2, 1])
    assert state(db_alias) == {0: ("n", T + 700, 2), 1: (None, 0, 0), 2: (None, 0, 0)}
    leases.ensure(SCOPE, [])
    assert len(state(db_alias)) == 3


# --- hold ---


def test_hold_takes_free_rows_and_returns_the_epochs_held(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0, 1, 2, 3])
    assert leases.hold(SCOPE, "a", [0, 1], until_ms=T + 100, now_ms=T) == {0: 1, 1: 1}
    assert state(db_alias) == {
        0: ("a", T + 100, 1),
        1: ("a", T + 100, 1),
        2: (None, 0, 0),
        3: (None, 0, 0),
    }


def test_hold_leaves_another_owners_live_lease_alone(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0, 1, 2])
    leases.hold(SCOPE, "a", [0, 1], until_ms=T + 100, now_ms=T)
    assert leases.hold(SCOPE, "b", [1, 2], until_ms=T + 300, now_ms=T + 50) == {2: 1}
    assert state(db_alias) == {
        0: ("a", T + 100, 1),
        1: ("a", T + 100, 1),
        2: ("b", T + 300, 1),
    }


def test_hold_renews_own_leases_keeping_the_epoch_and_releases_the_rest(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0, 1, 2])
    leases.hold(SCOPE, "a", [0, 1, 2], until_ms=T + 100, now_ms=T)
    assert leases.hold(SCOPE, "a", [0], until_ms=T + 900, now_ms=T + 50) == {0: 1}
    # Released rows keep their epoch; the next taker raises it.
    assert state(db_alias) == {0: ("a", T + 900, 1), 1: (None, 0, 1), 2: (None, 0, 1)}
    assert leases.hold(SCOPE, "b", [1, 2], until_ms=T + 400, now_ms=T + 60) == {1: 2, 2: 2}
    assert state(db_alias) == {0: ("a", T + 900, 1), 1: ("b", T + 400, 2), 2: ("b", T + 400, 2)}


def test_hold_takes_a_lapsed_lease_with_the_next_epoch(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0])
    leases.hold(SCOPE, "a", [0], until_ms=T + 100, now_ms=T)
    assert leases.hold(SCOPE, "b", [0], until_ms=T + 500, now_ms=T + 50) == {}, "not lapsed yet"
    assert leases.hold(SCOPE, "b", [0], until_ms=T + 500, now_ms=T + 101) == {0: 2}
    assert state(db_alias) == {0: ("b", T + 500, 2)}
    # The former owner holds nothing now, and its hold changes nothing.
    assert leases.hold(SCOPE, "a", [0], until_ms=T + 999, now_ms=T + 102) == {}
    assert state(db_alias) == {0: ("b", T + 500, 2)}


def test_hold_of_nothing_releases_everything_the_owner_held(db_alias: str) -> None:
    leases = stores_for(db_alias).log.leases
    leases.ensure(SCOPE, [0, 1])
    leases.ensure(OTHER_SCOPE, [0])
    leases.hold(SCOPE, "a", [0, 1], until_ms=T + 100, now_ms=T)
    leases.hold(OTHER_SCOPE, "a", [0], until_ms=T + 100, now_ms=T)
    assert leases.hold(SCOPE, "a", [], until_ms=T + 200, now_ms=T + 10) == {}
    assert state(db_alias) == {0: (None, 0, 1), 1: (None, 0, 1)}
    assert state(db_alias, OTHER_SCOPE) == {0: ("a", T + 100, 1)}, "another scope is untouched"
