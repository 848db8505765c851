"""Every path the documentation names is a path of the package: the names of docs/api.md's
"Where things live" table, every ``from django_sqlqueue... import ...`` line of the docs' and
README's code, every ``django_sqlqueue.x.y`` anywhere in their text (a module, or a name in
one), the class paths recorded in job rows' errors, and the loggers the docs name. A module
that moves takes its importers along (no shim stays at the old path), so a doc still naming
the old path fails here."""

import ast
import functools
import importlib
import logging
import pkgutil
import re
from pathlib import Path

import django
import pytest
from django.apps import apps

import django_sqlqueue
from tests.support.api_table import api_table

# The docs name the django.tasks backend's modules, which import django.tasks (Django 6+): on
# Django 5.2 they cannot import. Checked in the Django 6.0 and 6.1 passes.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("django.tasks") is None,
                                reason="the docs' paths include the django.tasks backend: Django 6")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(django_sqlqueue.__file__).parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ROWS = api_table()


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
    for path in DOCS:
        for block in re.findall(r"```python\n(.*?)```", path.read_text(), re.S):
            for match in re.finditer(r"^from (django_sqlqueue[\w.]*) import ([\w, ]+)", block,
                                     re.M):
                if not match[1].startswith("django_sqlqueue.admin"):
                    found.add((match[1], tuple(n.split(" as ")[0].strip()  # `import a as b`
                                               for n in match[2].split(","))))
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


# ---- every dotted path of the docs' text ----------------------------------------------------
DOTTED = re.compile(r"(?<![\w.])django_sqlqueue(?:\.[A-Za-z_]\w*)+")


def mentions(text: str):
    """(line number, path, is_logger) of each ``django_sqlqueue.x.y`` in a document's text. A
    mention is of a logger when its line says "logger", or it sits in a table's Logger column."""
    header = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("|"):
            header = None
        elif header is None:
            header = [cell.strip() for cell in line.strip().strip("|").split("|")]
        for match in DOTTED.finditer(line):
            column = line[:match.start()].count("|") - 1
            in_logger_column = (header is not None and 0 <= column < len(header)
                                and header[column] == "Logger")
            yield number, match[0], in_logger_column or "logger" in line.lower()


def permissions() -> set:
    """``django_sqlqueue.<codename>`` of each permission of the app's models."""
    found = set()
    for model in apps.get_app_config("django_sqlqueue").get_models(include_auto_created=True):
        opts = model._meta
        found.update(f"{action}_{opts.model_name}" for action in opts.default_permissions)
        found.update(codename for codename, _ in opts.permissions)
    return {f"django_sqlqueue.{codename}" for codename in found}


def defined_in(path: Path, name: str) -> bool:
    """Whether a module's source defines or imports ``name`` at its top level (for the modules
    this test process cannot import: the admin's needs the admin app, the django.tasks backend
    Django 6)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names = {node.name}
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        else:
            continue
        if name in names:
            return True
    return False


def statically(dotted: str) -> bool:
    """``dotted`` read from the package's files: a module, or a module and one name in it."""
    parts = dotted.split(".")[1:]
    for cut in range(len(parts), 0, -1):
        base = PACKAGE.joinpath(*parts[:cut])
        module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if module.is_file():
            rest = parts[cut:]
            return not rest or (len(rest) == 1 and defined_in(module, rest[0]))
    return False


def importable(dotted: str) -> bool:
    """``dotted`` names a module of the package, or a name (an attribute of a name...) in one."""
    if dotted.startswith("django_sqlqueue.admin") or (
            dotted.startswith("django_sqlqueue.backend") and django.VERSION < (6, 0)):
        return statically(dotted)
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        if found.__name__ != ".".join(parts[:cut]) or PACKAGE not in Path(found.__file__).parents:
            return False  # another module under this name, or a module of another copy
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def unresolved(text: str) -> list:
    """The mentions of ``text`` that name nothing: a path that does not import (and is no
    permission of the app), or a logger no module of the package makes."""
    known_permissions = permissions()
    return [f"line {number}: {path}" + (" (a logger)" if is_logger else "")
            for number, path, is_logger in mentions(text)
            if not (is_logger_name(path) if is_logger
                    else path in known_permissions or importable(path))]


def test_every_dotted_path_the_docs_name_imports():
    failures = [f"{path.relative_to(ROOT)} {failure}"
                for path in DOCS for failure in unresolved(path.read_text())]
    assert failures == []


def test_a_doc_naming_a_module_that_moved_fails():
    """What the test above would say of a doc naming old paths (the modules that only handed on
    moved code: django_sqlqueue.queries, .scheduling, ...), and what it accepts."""
    text = "\n".join([
        "`QueueStats` (in `django_sqlqueue.queries`) is a dataclass:",  # 1: a moved module
        "Delays from `django_sqlqueue.retry.retry_delay_seconds`.",  # 2: a name in one
        "`django_sqlqueue.run.retry.retry_delay_seconds`, `django_sqlqueue.models.Job`",
        "| Action | Permission |",
        "|---|---|",
        "| cancel | `django_sqlqueue.cancel_job` |",  # a permission
        "",
        "| Line | Logger | Level |",
        "|---|---|---|",
        "| `schedule name=...` | `django_sqlqueue.scheduling` | INFO |",  # a logger's name
        "| `job finished` | `django_sqlqueue.worker.gone` | INFO |",  # 11: no such logger
        "Logs, logger `django_sqlqueue.execution`.",
        "the run's `django_sqlqueue.no_such_permission`",  # 13
    ])
    assert unresolved(text) == [
        "line 1: django_sqlqueue.queries", "line 2: django_sqlqueue.retry.retry_delay_seconds",
        "line 11: django_sqlqueue.worker.gone (a logger)",
        "line 13: django_sqlqueue.no_such_permission",
    ]


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


# ---- loggers ----------------------------------------------------------------------------------
@functools.cache
def made_loggers() -> frozenset:
    """The names of the loggers the package's modules make, once every module is imported."""
    def import_all(path, prefix):
        for module in pkgutil.iter_modules(path, prefix):
            if module.name == "django_sqlqueue.admin" or (
                    module.name == "django_sqlqueue.backend" and django.VERSION < (6, 0)):
                continue
            imported = importlib.import_module(module.name)
            if module.ispkg:
                import_all(imported.__path__, module.name + ".")

    import_all(django_sqlqueue.__path__, "django_sqlqueue.")
    return frozenset(name for name, logger in logging.Logger.manager.loggerDict.items()
                     if isinstance(logger, logging.Logger))


def is_logger_name(name: str) -> bool:
    """A logger of the package, or the parent of some (``django_sqlqueue.worker``: what the
    worker's own lines are labelled, and a name that configures every worker logger)."""
    return any(made == name or made.startswith(name + ".") for made in made_loggers())


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
    names = documented_loggers()
    assert "django_sqlqueue.worker.maintenance" in names and len(names) > 8
    assert [name for name in names if name not in made_loggers()] == []
