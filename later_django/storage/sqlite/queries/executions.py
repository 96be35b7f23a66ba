"""Statements of the executions store (to be filled by the store's move to the driver pattern)."""
