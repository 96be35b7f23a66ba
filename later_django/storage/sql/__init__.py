"""Named SQL statements, one module per area, for SQLite and PostgreSQL."""
