"""core.topics: key routing is fixed, whatever the process or the key's type."""

from __future__ import annotations

import pytest

from later_django.core.topics import key_bytes, partition_for_key


def test_keys_of_every_type_route_by_their_canonical_bytes() -> None:
    assert key_bytes("order-7") == b"order-7"
    assert key_bytes(b"\x00raw") == b"\x00raw"
    assert key_bytes(42) == b"42"
    assert partition_for_key(42, 16) == partition_for_key("42", 16)


def test_routing_is_pinned_so_producers_of_two_releases_agree() -> None:
    # BLAKE2b-64 of the key, big-endian, modulo the count: must never change.
    routed = [partition_for_key(f"k{index}", 16) for index in range(8)]
    assert routed == [7, 0, 14, 13, 3, 15, 0, 13]
    assert all(0 <= partition_for_key(index, 7) < 7 for index in range(100))


@pytest.mark.parametrize("key", [True, 1.5, None, ["a"]])
def test_a_key_of_another_type_is_refused_naming_it(key: object) -> None:
    with pytest.raises(TypeError, match="a partition key must be str, bytes or int"):
        key_bytes(key)  # type: ignore[arg-type]
