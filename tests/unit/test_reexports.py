"""No module of the package only hands on names defined elsewhere: when code moves, its
importers move with it, so the tree holds each module once. The faces docs/api.md gives as
the public API (``django_sqlqueue.models``, ``django_sqlqueue.workflows``...) are the only
packages whose ``__init__.py`` may be made of imports."""

import ast
from pathlib import Path

import django_sqlqueue
from tests.support.api_table import api_table

PACKAGE = Path(django_sqlqueue.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def hands_on(statement: ast.stmt) -> bool:
    """Whether a top-level statement only hands on a name: an import, ``__all__``, a name bound
    to another name or a name's attribute (``WorkerLost = outcomes.WorkerLost``), or the old
    shims' trick of putting another module in ``sys.modules``."""
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return True
    if isinstance(statement, ast.Assign | ast.AnnAssign):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return True
        if any(isinstance(t, ast.Subscript) and ast.unparse(t.value) == "sys.modules"
               for t in targets):
            return True
        return isinstance(statement.value, ast.Name | ast.Attribute)
    return False


def only_reexports(source: str) -> bool:
    """Whether a module's body, its docstring aside, is imports and names handed on, at least
    one of them a name: a docstring-only ``__init__.py`` hands on nothing."""
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return bool(body) and all(hands_on(statement) for statement in body)


def public_faces() -> set:
    """The packages docs/api.md's table names (a package's face is its ``__init__.py``)."""
    return {module for module, _ in api_table()
            if (PACKAGE.parent.joinpath(*module.split(".")) / "__init__.py").is_file()}


def test_no_module_only_reexports_names():
    faces = public_faces()
    assert {"django_sqlqueue", "django_sqlqueue.models", "django_sqlqueue.workflows"} <= faces
    found = [module_name(path) for path in sorted(PACKAGE.rglob("*.py"))
             if "migrations" not in path.parts and only_reexports(path.read_text())]
    assert [name for name in found if name not in faces] == []
    assert "django_sqlqueue.workflows" in found, "the scan found no faces: it is broken"


def test_what_counts_as_only_reexporting():
    shim = '"""Moved."""\nimport sys\n\nfrom .run import runner as _module\n\n' \
           "sys.modules[__name__] = _module\n"
    names = "from .declare import ScheduleSpec, declared\n\n__all__ = ['ScheduleSpec']\n"
    alias = "from .run import outcomes\n\nWorkerLost = outcomes.WorkerLost\n"
    assert only_reexports(shim) and only_reexports(names) and only_reexports(alias)
    code = "from .run import outcomes\n\n\ndef lost():\n    return outcomes.WorkerLost\n"
    constant = "from .conf import get_settings\n\nLIMIT = 100\n"
    assert not only_reexports(code) and not only_reexports(constant)
    assert not only_reexports('"""Running a job: runner.py, outcomes.py."""\n')
