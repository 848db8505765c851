"""Per-database differences live in the drivers of ``db/``: no module elsewhere tests which
database it is on (``connection.vendor``, ``mysql_is_mariadb``) nor imports a driver's package
(``db/postgresql/``, ``db/sqlite/``, ``db/mariadb/``), even inside a function; it asks
``db.ops(connection)`` for a capability flag, a rule, a statement, NOTIFY or LISTEN instead. The
scans read the source, as test_layers.py reads the imports; migrations, which never change and
each name the schema of one database, are left out."""

import ast
from pathlib import Path

import django_sqlqueue

PACKAGE = Path(django_sqlqueue.__file__).parent
VENDOR_ATTRIBUTES = {"vendor", "mysql_is_mariadb"}
#: The drivers' packages: only db/ itself reaches into them.
DRIVER_PACKAGES = tuple(f"django_sqlqueue.db.{name}" for name in ("postgresql", "sqlite",
                                                                   "mariadb"))


def outside_db():
    """(path relative to the package, its parsed source) of each module outside db/ and
    migrations/."""
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] not in ("db", "migrations"):
            yield relative, ast.parse(path.read_text())


def vendor_tests() -> dict:
    """Each module outside db/ (and migrations/) that reads a vendor attribute: its lines."""
    found = {}
    for relative, tree in outside_db():
        lines = [node.lineno for node in ast.walk(tree)
                 if isinstance(node, ast.Attribute) and node.attr in VENDOR_ATTRIBUTES]
        if lines:
            found[relative.as_posix()] = lines
    return found


def imported(tree, package: str) -> list:
    """(line, module) of every import in ``tree`` (anywhere in it), for a module of ``package``
    (dotted): each ``from X import name`` as ``X.name`` too, since the name may be a module; a
    string naming a module (``import_module("...")``) as well."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[:len(parts) - node.level + 1], *([base] if base else [])])
            found += [(node.lineno, base), *((node.lineno, f"{base}.{alias.name}")
                                             for alias in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
    return found


def driver_imports(modules) -> dict:
    """Of ``modules`` ((path relative to the package, parsed source)), each that imports a
    driver's package or a module of it: its lines."""
    found = {}
    for relative, tree in modules:
        package = ".".join(("django_sqlqueue", *relative.parent.parts))
        lines = sorted({line for line, name in imported(tree, package)
                        if any(name == driver or name.startswith(f"{driver}.")
                               for driver in DRIVER_PACKAGES)})
        if lines:
            found[relative.as_posix()] = lines
    return found


def test_vendor_branches_appear_only_under_db():
    assert vendor_tests() == {}


def test_the_scan_finds_a_vendor_test():
    source = "def f(connection):\n    return connection.vendor == 'postgresql'\n"
    nodes = ast.walk(ast.parse(source))
    assert [n.lineno for n in nodes if isinstance(n, ast.Attribute) and n.attr == "vendor"] == [2]


def test_no_module_outside_db_imports_a_driver():
    assert driver_imports(outside_db()) == {}


def test_the_scan_finds_an_import_of_a_driver():
    source = ("from ..db.postgresql import statements\n"
              "def f():\n    from ..db import mariadb\n"
              "import django_sqlqueue.db.sqlite.driver\n"
              "from ..db import ops\n"
              "name = 'django_sqlqueue.db.postgresql.driver'\n")
    found = driver_imports([(Path("worker/wakeup.py"), ast.parse(source))])
    assert found == {"worker/wakeup.py": [1, 3, 4, 6]}
