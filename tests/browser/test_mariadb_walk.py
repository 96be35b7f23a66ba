"""The dashboard in a real browser on MariaDB (issue 36): the example project served on
a scratch MariaDB database of its own, seeded by ``demo_seed``.

One test, to keep the lane's time small: the operator's walk of
``test_operator_walk.py`` (the failures page, the failed list filtered by task and
error class, which MySQL matches through their hashed columns (decision 237), the
bulk retry's confirmation and the retry, then the dashboard following a burst worker
without a reload), then every dashboard page and a job's page, each answering 200
and photographed (``mariadb-page-<name>.png``). It takes ``db_alias`` (MariaDB only),
so the MariaDB lane keeps it; in the main lane it is MariaDB's own case, skipped only
when no MariaDB server answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import Site
from tests.browser.example_site import dev_server, free_port, manage
from tests.browser.login import PASSWORD, USERNAME
from tests.browser.test_operator_walk import DASHBOARD, PAGES, shoot, walk
from tests.scratch_databases import mariadb_scratch_database

pytestmark = pytest.mark.parametrize("db_alias", ["mariadb"], indirect=True)


def seeded_jobs(url: str) -> int:
    """The rows of ``later_jobs_index`` in the MariaDB database at ``url``."""
    import dj_database_url
    import MySQLdb

    config = dj_database_url.parse(url)
    connection = MySQLdb.connect(
        host=config["HOST"],
        port=int(config["PORT"]),
        user=config["USER"],
        password=config["PASSWORD"],
        database=config["NAME"],
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM later_jobs_index")
            (count,) = cursor.fetchone()
    finally:
        connection.close()
    return int(count)


@pytest.fixture
def mariadb_site(db_alias: str, tmp_path: Path, chromium_path: str) -> Iterator[Site]:
    """The example project on a migrated, seeded scratch MariaDB database."""
    with mariadb_scratch_database("browser") as url:
        manage(url, "migrate", "--verbosity", "0")
        manage(url, "demo_superuser", "--username", USERNAME, "--password", PASSWORD)
        manage(url, "demo_seed")
        assert seeded_jobs(url) > 0, "the example project wrote elsewhere than MariaDB"
        with dev_server(url, free_port(), tmp_path / "runserver.log") as base:
            yield Site(base, url)


def test_the_operator_walk_and_every_page_on_mariadb(
    page, mariadb_site: Site, output_directory: Path
) -> None:
    walk(page, mariadb_site, output_directory, "mariadb-walk")
    base = mariadb_site.base  # the walk logged the page in
    for name, path in PAGES.items():
        answer = page.goto(f"{base}{path}")
        assert answer is not None and answer.status == 200, (path, answer)
        shoot(page, output_directory, f"mariadb-page-{name}")
    page.goto(f"{base}{DASHBOARD}jobs/failed/")
    page.click("table.later-jobs tbody tr a >> nth=0")
    page.wait_for_url("**/job/*/")
    shoot(page, output_directory, "mariadb-page-job")
    answer = page.goto(f"{base}{DASHBOARD}workflows/")
    assert answer is not None and answer.status == 200
