"""Statements of the leases store (to be filled by the store's move to the driver pattern)."""
