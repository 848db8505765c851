"""Every import path the documentation gives keeps working, wherever its module lives now: the
names of docs/api.md's "Where things live" table, every ``from django_sqlqueue... import ...``
line of the docs' and README's code, and the class paths recorded in job rows' errors."""

import importlib
import logging
import pkgutil
import re
from pathlib import Path

import django
import pytest

import django_sqlqueue

ROOT = Path(__file__).resolve().parents[2]
API = (ROOT / "docs" / "api.md").read_text()


def table_rows():
    """(module, names) of each row of docs/api.md's table of where things live."""
    table = API.split("Where things live:", 1)[1].split("\n\n", 2)[1]
    rows = []
    for line in table.splitlines()[2:]:
        module_cell, names_cell = (cell.strip() for cell in line.strip("|").split("|"))
        module = module_cell.strip("`")
        # "`WorkerLost` in `django_sqlqueue.run.outcomes`": a name documented in another module
        for name, elsewhere in re.findall(r"`(\w+)` in `(django_sqlqueue[\w.]*)`", names_cell):
            rows.append((elsewhere, [name]))
        names_cell = re.sub(r"\([^()]*(\([^()]*\)[^()]*)*\)", "", names_cell)  # asides
        rows.append((module, re.findall(r"`(\w+)`", names_cell)))
    return rows


ROWS = table_rows()


def test_the_table_was_read():
    modules = {module for module, _ in ROWS}
    assert {"django_sqlqueue.models", "django_sqlqueue.schedules.operations",
            "django_sqlqueue.models.job_queryset", "django_sqlqueue.run.outcomes",
            "django_sqlqueue.worker.heartbeat"} <= modules
    assert sum(len(names) for _, names in ROWS) > 40


@pytest.mark.parametrize(("module", "names"), ROWS, ids=[f"{m}:{len(n)}" for m, n in ROWS])
def test_each_documented_name_imports_from_its_documented_module(module, names):
    imported = importlib.import_module(module)
    missing = [name for name in names if not hasattr(imported, name)]
    assert missing == [], f"{module} no longer has {missing}"


def code_imports():
    """Each ``from django_sqlqueue... import ...`` statement of the docs' and README's code, but
    the admin's: importing it needs the admin app, which the tests in tests/admin/ install."""
    found = set()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```python\n(.*?)```", path.read_text(), re.S):
            for match in re.finditer(r"^from (django_sqlqueue[\w.]*) import ([\w, ]+)", block,
                                     re.M):
                if not match[1].startswith("django_sqlqueue.admin"):
                    found.add((match[1], tuple(n.strip() for n in match[2].split(","))))
    return sorted(found)


IMPORTS = code_imports()


def test_the_code_of_the_docs_was_read():
    assert ("django_sqlqueue", ("job",)) in IMPORTS
    assert len(IMPORTS) > 10


@pytest.mark.parametrize(("module", "names"), IMPORTS, ids=[m for m, _ in IMPORTS])
def test_each_import_in_the_docs_code_works(module, names):
    imported = importlib.import_module(module)
    for name in names:
        assert hasattr(imported, name) or importlib.import_module(f"{module}.{name}")


@pytest.mark.parametrize("path", [
    "django_sqlqueue.run.outcomes.WorkerLost",
    "django_sqlqueue.run.outcomes.WorkerStopped",
    "django_sqlqueue.worker.heartbeat.JobTimeout",
    "django_sqlqueue.exceptions.JobCancelled",
    "django_sqlqueue.exceptions.InvalidPayload",
])
def test_the_error_types_recorded_in_rows_are_their_classes_paths(path):
    """A row's errors name the exception's class by ``module.qualname``, which a reader can
    import: the class is where its recorded name says."""
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    assert f"{cls.__module__}.{cls.__qualname__}" == path


def documented_loggers():
    """The logger names docs/operations.md's table of log lines and docs/schedules.md give."""
    operations = (ROOT / "docs" / "operations.md").read_text()
    table = operations.split("| Line | Logger | Level |", 1)[1].split("\n\n", 1)[0]
    names = set()
    for line in table.splitlines()[2:]:
        names.update(re.findall(r"`(django_sqlqueue[\w.]*)`", line.rsplit("|", 3)[-3]))
    schedules = (ROOT / "docs" / "schedules.md").read_text()
    names.update(re.findall(r"[Ll]ogger `(django_sqlqueue[\w.]*)`", schedules))
    return sorted(names)


def test_the_documented_loggers_keep_their_names():
    """A module that moved keeps the logger name the docs give (logging configurations name
    them), so each documented name is a logger some module of the package made."""
    def import_all(path, prefix):
        for module in pkgutil.iter_modules(path, prefix):
            if module.name == "django_sqlqueue.admin" or (
                    module.name == "django_sqlqueue.backend" and django.VERSION < (6, 0)):
                continue
            imported = importlib.import_module(module.name)
            if module.ispkg:
                import_all(imported.__path__, module.name + ".")

    import_all(django_sqlqueue.__path__, "django_sqlqueue.")
    names = documented_loggers()
    assert "django_sqlqueue.worker.maintenance" in names and len(names) > 8
    made = {name for name, logger in logging.Logger.manager.loggerDict.items()
            if isinstance(logger, logging.Logger)}
    assert [name for name in names if name not in made] == []
