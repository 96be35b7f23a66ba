"""Tasks of the results-passed-to-children tests (``context.parent_results``)."""

from __future__ import annotations

from later_django.compat.tasks import task


@task(takes_context=True)
def parent_results(context) -> list[list[object]]:
    """Its parents' results as ``[[parent id, result], ...]``, in the mapping's order."""
    return [[parent, value] for parent, value in context.parent_results.items()]


@task(takes_context=True)
def add_to_parent(context, amount: int) -> int:
    """Its one parent's result (0 without a parent) plus ``amount``."""
    return sum(context.parent_results.values()) + amount


@task(takes_context=True)
def ignores_parents(context, value: int) -> int:
    """Never looks at its parents' results."""
    return value


@task
def returns_bytes(size: int) -> str:
    """A string of ``size`` characters (``size`` + 1 to 5 bytes encoded)."""
    return "x" * size


@task
def number(value: int) -> int:
    return value
