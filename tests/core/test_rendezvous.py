"""core.rendezvous: one owner per thing, stable, and only a leaver's things move."""

from __future__ import annotations

import pytest

from later_django.core import rendezvous

SCOPES = [("orders", partition) for partition in range(64)]


def test_every_process_computes_the_same_owner_whatever_the_order_of_candidates() -> None:
    candidates = ["w1", "w2", "w3"]
    for scope in SCOPES:
        assert rendezvous.owner(candidates, *scope) == rendezvous.owner(
            list(reversed(candidates)), *scope
        )


def test_the_score_is_fixed_across_versions() -> None:
    # BLAKE2b of "orders\x000\x00w1", not the per-process salted hash():
    # this figure must never change, or workers of two releases disagree.
    assert rendezvous.score("w1", "orders", 0) == 0xC314C36B6AD47C63
    assert rendezvous.score("w1", "orders", 0) == rendezvous.score("w1", "orders", "0")
    assert rendezvous.score("w1", "orders", 0) != rendezvous.score("w1", "orders", 1)


def test_only_the_things_of_a_candidate_that_leaves_change_owner() -> None:
    before = {scope: rendezvous.owner(["w1", "w2", "w3"], *scope) for scope in SCOPES}
    after = {scope: rendezvous.owner(["w1", "w3"], *scope) for scope in SCOPES}
    moved = {scope for scope in SCOPES if before[scope] != after[scope]}
    assert moved == {scope for scope in SCOPES if before[scope] == "w2"}
    assert moved, "w2 owned some of 64 partitions"


def test_things_spread_over_the_candidates() -> None:
    owners = [rendezvous.owner(["w1", "w2", "w3", "w4"], *scope) for scope in SCOPES]
    assert set(owners) == {"w1", "w2", "w3", "w4"}


def test_no_candidate_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="needs at least one candidate"):
        rendezvous.owner([], "orders", 1)
