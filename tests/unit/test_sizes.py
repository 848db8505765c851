"""Sizes a reader can hold in mind: no module of the package over 400 lines, and no class of the
worker over 250 (one that fetches, heartbeats and shuts down at once is what STYLE.md warns of).
The scan reads the source, as test_layers.py reads the imports; a module that grows past its
size is split by duty, not trimmed."""

import ast
from pathlib import Path

import django_sqlqueue

PACKAGE = Path(django_sqlqueue.__file__).parent
MAX_MODULE_LINES = 400
MAX_WORKER_CLASS_LINES = 250


def long_modules(package: Path = PACKAGE, limit: int = MAX_MODULE_LINES) -> dict:
    """Each module of ``package`` longer than ``limit`` lines: its length."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > limit:
            found[path.relative_to(package).as_posix()] = lines
    return found


def long_classes(source: str, limit: int) -> dict:
    """Each class of ``source`` (nested ones too) longer than ``limit`` lines: its length,
    decorators included."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if node.end_lineno - first + 1 > limit:
                found[node.name] = node.end_lineno - first + 1
    return found


def test_no_module_is_over_400_lines():
    assert long_modules() == {}, "split these modules by duty"


def test_no_class_of_the_worker_is_over_250_lines():
    found = {}
    for path in sorted((PACKAGE / "worker").rglob("*.py")):
        for name, lines in long_classes(path.read_text(), MAX_WORKER_CLASS_LINES).items():
            found[f"{path.relative_to(PACKAGE).as_posix()}:{name}"] = lines
    assert found == {}, "split these classes by duty"


def test_the_scans_find_what_is_too_long(tmp_path):
    (tmp_path / "short.py").write_text("x = 1\n" * 400)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "long.py").write_text("x = 1\n" * 401)
    assert long_modules(tmp_path) == {"sub/long.py": 401}
    body = "    x = 1\n" * 249
    assert long_classes(f"class Short:\n{body}", 250) == {}
    assert long_classes(f"@decorated\nclass Long:\n{body}", 250) == {"Long": 251}
    nested = "def f():\n    class Inner:\n" + "        x = 1\n" * 250
    assert long_classes(nested, 250) == {"Inner": 251}
