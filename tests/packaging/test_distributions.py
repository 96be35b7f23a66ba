"""The sdist and the wheel are fit for a package index: they build, ``twine check``
passes, both carry the MIT license, the sdist ships no tests, the metadata names the
supported Django and Python versions, and the installed wheel alone (not this checkout)
migrates and runs a job on SQLite and on PostgreSQL."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.scratch_databases import mariadb_scratch_database

ROOT = Path(__file__).resolve().parent.parent.parent
SUPPORTED_CLASSIFIERS = {
    "Framework :: Django",
    "Framework :: Django :: 5.2",
    "Framework :: Django :: 6.0",
    "Framework :: Django :: 6.1",
    "Programming Language :: Python :: 3.12",
    "Programming Language :: Python :: 3.13",
}


def run(*command: str | Path, **options) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, timeout=300, **options
    )


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``python -m build`` of this checkout: the sdist, and the wheel built from it."""
    for tool in ("build", "twine"):
        if importlib.util.find_spec(tool) is None:
            pytest.fail(
                f"{tool!r} is not installed: it is in the test extras (pip install -e '.[test]')"
            )
    out = tmp_path_factory.mktemp("dist")
    built = run(sys.executable, "-m", "build", "--outdir", out, ROOT)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return {"sdist": sdist, "wheel": wheel}


def sdist_names(sdist: Path) -> list[str]:
    """The sdist's member paths, without the leading ``later_django-<version>/``."""
    with tarfile.open(sdist) as archive:
        return [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]


def wheel_metadata(wheel: Path):  # type: ignore[no-untyped-def]
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(archive.read(name).decode())


def test_the_sdist_and_the_wheel_ship_the_mit_license(dist: dict[str, Path]) -> None:
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License")
    assert "LICENSE" in sdist_names(dist["sdist"])
    with zipfile.ZipFile(dist["wheel"]) as archive:
        (shipped,) = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(shipped).decode() == license_text
    metadata = wheel_metadata(dist["wheel"])
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]


def test_the_sdist_ships_the_package_and_its_docs_but_no_tests(dist: dict[str, Path]) -> None:
    names = sdist_names(dist["sdist"])
    top = {name.split("/")[0] for name in names}
    assert {"later_django", "docs", "README.md", "LICENSE", "pyproject.toml"} <= top
    assert not top & {"tests", "bench", "chaos", "example_project", "bin"}, sorted(top)
    assert not [name for name in names if name.endswith((".pyc", ".sqlite3"))]
    assert "later_django/migrations/0001_initial.py" in names
    assert "later_django/templates/later_django/dashboard.html" in names
    assert CONTRIB_WAGTAIL_PANEL in names


#: The optional Wagtail app's template: package data outside ``later_django/templates``.
CONTRIB_WAGTAIL_PANEL = (
    "later_django/contrib/wagtail/templates/later_django/contrib/wagtail/panel.html"
)


def test_the_wheel_ships_the_contrib_apps_templates(dist: dict[str, Path]) -> None:
    with zipfile.ZipFile(dist["wheel"]) as archive:
        names = set(archive.namelist())
    assert CONTRIB_WAGTAIL_PANEL in names
    assert "later_django/contrib/wagtail/wagtail_hooks.py" in names


def test_the_metadata_names_the_supported_versions_urls_and_extras(
    dist: dict[str, Path],
) -> None:
    metadata = wheel_metadata(dist["wheel"])
    assert set(metadata.get_all("Classifier")) >= SUPPORTED_CLASSIFIERS
    assert metadata["Requires-Python"] == ">=3.12"
    requires = metadata.get_all("Requires-Dist")
    assert "Django<6.2,>=5.2" in requires
    assert any(r.startswith("django-tasks") and 'extra == "django52"' in r for r in requires)
    assert any(r.startswith("prometheus-client") and 'extra == "metrics"' in r for r in requires)
    assert any(r.startswith("opentelemetry-api") and 'extra == "otel"' in r for r in requires)
    urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL"))
    assert urls["Source"] == "https://github.com/later-django/later-django"
    assert all(
        url.startswith("https://github.com/later-django/later-django") for url in urls.values()
    )
    assert "django-tasks" in metadata["Keywords"].split(",")
    assert metadata["Description-Content-Type"] == "text/markdown"


def test_twine_check_passes_on_the_sdist_and_the_wheel(dist: dict[str, Path]) -> None:
    checked = run(sys.executable, "-m", "twine", "check", "--strict", dist["sdist"], dist["wheel"])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2, checked.stdout


# --- the installed wheel, on its own: a project that imports later_django from it ---

SETTINGS = """
import json, os
SECRET_KEY = "wheel-test"
USE_TZ = True
INSTALLED_APPS = [
    "later_django", "django.contrib.auth", "django.contrib.contenttypes",
    "django.contrib.staticfiles",
]
STATIC_URL = "static/"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
DATABASES = {"default": json.loads(os.environ["WHEEL_TEST_DATABASE"])}
TASKS = {"default": {"BACKEND": "later_django.backend.LaterBackend", "QUEUES": ["default"]}}
"""

TASKS_MODULE = """
from later_django.compat.tasks import task

@task
def add(a, b):
    return a + b
"""

ENQUEUE = "import wheel_tasks; print(wheel_tasks.add.enqueue(2, 3).id)"

INSPECT = """
import json, os
import later_django, wheel_tasks
from django.contrib.staticfiles import finders
from django.template.loader import get_template
result = wheel_tasks.add.get_result(os.environ["WHEEL_TEST_JOB"])
get_template("later_django/dashboard.html")
print(json.dumps([later_django.__file__, str(result.status), result.return_value,
                  bool(finders.find("later_django/dashboard.css"))]))
"""


@pytest.fixture
def wheel_database(db_alias: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Connection settings of an empty database for the wheel's project: a new SQLite
    file, or a new PostgreSQL or MariaDB database on the test server (dropped
    afterwards)."""
    from django.conf import settings

    if db_alias == "default":
        yield {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "wheel.sqlite3")}
        return
    config = settings.DATABASES[db_alias]
    keys = ("ENGINE", "HOST", "PORT", "USER", "PASSWORD")
    if config["ENGINE"] == "django.db.backends.mysql":
        import dj_database_url

        with mariadb_scratch_database("wheel") as url:
            parsed = dj_database_url.parse(url)
            yield {key: parsed[key] for key in (*keys, "NAME", "OPTIONS")}
        return
    import psycopg

    name = f"{config['TEST']['NAME']}_wheel"
    database = {key: config[key] for key in keys} | {"NAME": name}
    with psycopg.connect(
        host=config["HOST"] or None,
        port=config["PORT"] or None,
        user=config["USER"] or None,
        password=config["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    ) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield database
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_installed_wheel_migrates_and_runs_a_job(
    dist: dict[str, Path], wheel_database: dict[str, str], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    installed = run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--target", site, dist["wheel"])  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    project = tmp_path / "project"
    project.mkdir()
    (project / "wheel_settings.py").write_text(SETTINGS)
    (project / "wheel_tasks.py").write_text(TASKS_MODULE)
    environment = {
        **{key: value for key, value in os.environ.items() if key != "PYTHONPATH"},
        "PYTHONPATH": f"{site}{os.pathsep}{project}",
        "DJANGO_SETTINGS_MODULE": "wheel_settings",
        "WHEEL_TEST_DATABASE": json.dumps(wheel_database),
    }

    def django(*args: str, **more_environment: str) -> str:
        env = environment | more_environment
        done = run(sys.executable, "-m", "django", *args, env=env, cwd=project)
        assert done.returncode == 0, f"django {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""

    django("migrate", "--verbosity", "0")
    job_id = django("shell", "-c", ENQUEUE)
    django("later_worker", "--burst")
    module, status, value, static_found = json.loads(
        django("shell", "-c", INSPECT, WHEEL_TEST_JOB=job_id)
    )
    assert Path(module).is_relative_to(site), module
    assert (status, value, static_found) == ("SUCCESSFUL", 5, True)
