"""Per-database differences live in the drivers of ``db/``: no module elsewhere tests which
database it is on (``connection.vendor``, ``mysql_is_mariadb``); it asks ``db.ops(connection)``
for a capability flag, a rule or a statement instead. The scan reads the source, as
test_layers.py reads the imports; migrations, which never change, are left out."""

import ast
from pathlib import Path

import django_sqlqueue

PACKAGE = Path(django_sqlqueue.__file__).parent
VENDOR_ATTRIBUTES = {"vendor", "mysql_is_mariadb"}


def vendor_tests() -> dict:
    """Each module outside db/ (and migrations/) that reads a vendor attribute: its lines."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in ("db", "migrations"):
            continue
        lines = [node.lineno for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Attribute) and node.attr in VENDOR_ATTRIBUTES]
        if lines:
            found[relative.as_posix()] = lines
    return found


def test_vendor_branches_appear_only_under_db():
    assert vendor_tests() == {}


def test_the_scan_finds_a_vendor_test():
    source = "def f(connection):\n    return connection.vendor == 'postgresql'\n"
    nodes = ast.walk(ast.parse(source))
    assert [n.lineno for n in nodes if isinstance(n, ast.Attribute) and n.attr == "vendor"] == [2]
