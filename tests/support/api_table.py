"""docs/api.md's table of where things live, read as (module, names) rows: the documented
public paths, which tests/unit/test_documented_paths.py imports and
tests/unit/test_reexports.py lets stay faces made of imports."""

import re
from pathlib import Path

API = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def api_table() -> list:
    """(module, names) of each row of docs/api.md's table of where things live."""
    table = API.read_text().split("Where things live:", 1)[1].split("\n\n", 2)[1]
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
