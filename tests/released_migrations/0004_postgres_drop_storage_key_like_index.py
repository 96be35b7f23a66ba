"""PostgreSQL: drop the ``varchar_pattern_ops`` twin of ``later_storage.key``.

Django adds a ``..._like`` index beside every indexed ``CharField`` on
PostgreSQL, for ``LIKE 'prefix%'`` lookups. later_django compares keys by byte
order (the column's ``"C"`` collation, see migration 0002) and never with
``LIKE``, so the twin only costs an index entry on every record write: about
0.04 ms of the 0.77 ms an enqueue transaction took here. SQLite has no such index.
"""

from django.db import migrations

from tests.released_migrations._operations import VendorSQL

DROP_LIKE_TWIN = """
DO $$
DECLARE twin text;
BEGIN
    FOR twin IN
        SELECT indexname FROM pg_indexes
        WHERE tablename = 'later_storage' AND indexname LIKE 'later\\_storage\\_key\\_%\\_like'
    LOOP
        EXECUTE format('DROP INDEX %I', twin);
    END LOOP;
END $$
"""

RECREATE_LIKE_TWIN = (
    "CREATE INDEX IF NOT EXISTS later_storage_key_30330d1f_like "
    "ON later_storage (key varchar_pattern_ops)"
)


class Migration(migrations.Migration):
    dependencies = [("later_django", "0003_postgres_claim_function")]

    operations = [
        VendorSQL(
            forwards={"sqlite": [], "postgresql": [DROP_LIKE_TWIN]},
            backwards={"sqlite": [], "postgresql": [RECREATE_LIKE_TWIN]},
        )
    ]
