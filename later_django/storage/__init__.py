"""Storage: the contract (:mod:`.contract`), its value types, and the Django implementation."""
