"""The worker's "run migrate" line, as the docs show it, names this release's migrations: it
is the first thing a newcomer who skipped ``migrate`` sees, and it went stale with each new
migration."""

import re
from pathlib import Path

import django_sqlqueue

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = Path(django_sqlqueue.__file__).parent / "migrations"


def test_the_docs_show_the_migrate_hint_with_every_migration_of_this_release():
    names = sorted(path.stem for path in MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.py"))
    expected = (f"lacks {len(names)} of django_sqlqueue's migrations "
                f"({names[0]} to {names[-1]})")
    shown = {page.name: re.findall(r"lacks \d+ of django_sqlqueue's migrations \([^)]*\)",
                                   page.read_text())
             for page in (ROOT / "docs").glob("*.md")}
    shown = {page: hints for page, hints in shown.items() if hints}
    assert shown, "no page of docs/ shows the worker's migrate hint any more"
    assert {page: [expected] * len(hints) for page, hints in shown.items()} == shown
