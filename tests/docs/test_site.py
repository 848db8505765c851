"""The docs build into a site with scripts/docs.sh, the README's command, strictly (a broken
link or anchor fails it), and the site's search finds a setting by its name."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")


def test_the_site_builds_strictly_and_its_search_finds_max_interruptions(tmp_path):
    site = tmp_path / "site"
    build = subprocess.run(
        ["bash", "scripts/docs.sh"], cwd=ROOT, capture_output=True, text=True, timeout=240,
        env={**os.environ, "SQLQUEUE_DOCS_PYTHON": sys.executable, "SQLQUEUE_DOCS_SITE": str(site)})
    assert build.returncode == 0, build.stdout + build.stderr
    index = json.loads((site / "search" / "search_index.json").read_text())
    found = {entry["location"] for entry in index["docs"] if "max_interruptions" in entry["text"]}
    assert any(location.startswith("api/") for location in found), found
    # The Python API, from the docstrings: the job decorator's own words.
    reference = (site / "reference" / "index.html").read_text()
    assert "django_sqlqueue.registry.job" in reference
