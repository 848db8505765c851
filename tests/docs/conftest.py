"""The docs' snippets run in a site of their own (tests/docs/settings.py): this directory is
collected only with those settings, `pytest --ds=tests.docs.settings tests/docs`, as
scripts/test.sh runs it; the other passes, on the suite's settings, leave it out."""

import os

if os.environ.get("DJANGO_SETTINGS_MODULE") != "tests.docs.settings":
    collect_ignore_glob = ["*"]


def pytest_terminal_summary(terminalreporter):
    from tests.docs.test_snippets import TALLY

    if TALLY["pages"]:
        terminalreporter.write_line(
            f"docs snippets: {TALLY['executed']} executed, {TALLY['marked']} marked "
            f"(not run, with a reason), {TALLY['hidden']} hidden set-up blocks, "
            f"in {TALLY['pages']} pages")
