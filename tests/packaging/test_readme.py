"""README.md is also the package's page on an index (PyPI), where a relative link such
as ``docs/testing.md`` leads nowhere: every link in it is absolute, and each link into
this repository names a file that exists here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
REPOSITORY = "https://github.com/later-django/later-django"
#: Markdown links ``[text](target)`` and autolinks ``<https://...>``.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)[^)]*\)|<(https?://[^>]+)>")


def readme_links() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return [inline or auto for inline, auto in LINK.findall(text)]


def test_every_readme_link_is_absolute() -> None:
    links = readme_links()
    assert links, "README.md has no links"
    relative = [link for link in links if not link.startswith(("https://", "http://"))]
    assert relative == [], f"relative links break on a package index page: {relative}"


def test_every_readme_link_into_the_repository_names_a_file_that_exists() -> None:
    prefix = f"{REPOSITORY}/blob/main/"
    into_repository = [link for link in readme_links() if link.startswith(prefix)]
    assert into_repository, f"README.md links no file of {REPOSITORY}"
    missing = [
        link
        for link in into_repository
        if not (ROOT / link.removeprefix(prefix).split("#", 1)[0]).is_file()
    ]
    assert missing == [], f"README.md links files that do not exist: {missing}"
