"""Every Python and shell block of README.md and docs/*.md runs, in order, in a fresh site
(tests/docs/site.py says how each kind runs), or carries a ``<!-- skip: next "reason" -->``
marker; the marked ones stay under a tenth. A page about PostgreSQL runs on PostgreSQL only, the
others on SQLite; SQLQUEUE_DOCS_EVERY_PAGE=1 runs every page on the pass's database."""

import os
import re
import unittest
from pathlib import Path

import pytest

from tests.docs import site
from tests.settings import VENDOR

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
POSTGRESQL_PAGES = {"topology.md"}
TALLY = {"executed": 0, "marked": 0, "hidden": 0, "pages": 0}


def hidden(example) -> bool:
    return example.document.text.startswith("<!--", example.region.start)


def kind(example) -> str:
    if example.region.evaluator in (site.evaluate_python, site.evaluate_shell):
        return "hidden" if hidden(example) else "snippet"
    return "marker"


def run_page(path) -> tuple:
    """Runs the page's blocks in order; returns (executed, marked, hidden) or raises, naming the
    block."""
    document = site.SYBIL.parse(path)
    page = site.CURRENT["page"] = site.Page(path)
    page.adopt(document.namespace)
    executed = marked = hidden_blocks = 0
    try:
        for example in document.examples():
            what = kind(example)
            if what == "marker":
                action, reason = example.parsed
                if action in ("next", "start") and not (reason or "").strip():
                    raise AssertionError(f"{path.name}:{example.line}: a skip marker without "
                                         "a reason: <!-- skip: next \"why\" -->")
            try:
                example.evaluate()
            except unittest.SkipTest:
                marked += 1
                continue
            except Exception as exc:
                raise AssertionError(f"{path.name}, the block at line {example.line}: "
                                     f"{type(exc).__name__}: {exc}") from exc
            if what == "snippet":
                executed += 1
            elif what == "hidden":
                hidden_blocks += 1
    finally:
        page.close()
        site.CURRENT.clear()
    return executed, marked, hidden_blocks


@pytest.mark.django_db(transaction=True, databases="__all__")
@pytest.mark.parametrize("path", PAGES, ids=[path.name for path in PAGES])
def test_page_runs_as_written(path):
    on_postgresql = VENDOR == "postgresql"
    every_page = os.environ.get("SQLQUEUE_DOCS_EVERY_PAGE") == "1"  # each page on this database
    if (path.name in POSTGRESQL_PAGES) != on_postgresql and not every_page:
        pytest.skip("runs in the " + ("PostgreSQL" if not on_postgresql else "SQLite")
                    + " pass")
    executed, marked, hidden_blocks = run_page(path)
    TALLY["executed"] += executed
    TALLY["marked"] += marked
    TALLY["hidden"] += hidden_blocks
    TALLY["pages"] += 1


def test_marked_snippets_are_under_a_tenth():
    """Counted from the pages themselves, whatever the pass runs: each ``skip: next`` marks one
    snippet."""
    marked = snippets = 0
    for path in PAGES:
        examples = list(site.SYBIL.parse(path).examples())
        marked += sum(1 for example in examples
                      if kind(example) == "marker" and example.parsed[0] == "next")
        snippets += sum(1 for example in examples if kind(example) == "snippet")
    assert marked * 10 < snippets, f"{marked} of {snippets} snippets are marked"


@pytest.mark.django_db(transaction=True, databases="__all__")
@pytest.mark.parametrize(("block", "error"), [
    ("```bash\nmake deploy\n```\n", "cannot run 'make deploy' here: put a <!-- skip"),
    ("<!-- skip: next -->\n```bash\nmake deploy\n```\n", "a skip marker without a reason"),
    ("```python\nundefined_name\n```\n", "NameError"),
], ids=["unmarked", "no reason", "broken"])
def test_a_block_that_neither_runs_nor_says_why_fails(tmp_path, block, error):
    page = tmp_path / "new-page.md"
    page.write_text("# A new page\n\n" + block)
    with pytest.raises(AssertionError, match=re.escape(error)):
        run_page(page)


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_a_marked_block_is_counted_not_run(tmp_path):
    page = tmp_path / "new-page.md"
    page.write_text('<!-- skip: next "a deployment file" -->\n```bash\nmake deploy\n```\n\n'
                    "```bash\npython manage.py check\n```\n")
    assert run_page(page) == (1, 1, 0)
