"""later_django's migrations 0001-0018 and ``migration_operations`` as released
(commit 86e6670, before MySQL), frozen for ``tests/test_mysql_schema.py``: it builds a
database with them (``MIGRATION_MODULES``) and shows the current migrations change
nothing in its schema. Only the imports of ``VendorSQL`` and of earlier migrations
are rewritten to point here; ``_operations.py`` is the released
``migration_operations.py`` (a leading ``_``: the migration loader skips it). Never
edit these files.
"""
