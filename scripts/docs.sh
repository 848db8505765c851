#!/usr/bin/env bash
# The docs as a site, in site/ (open site/index.html): MkDocs with the Material theme, the Python
# API generated from the docstrings by mkdocstrings (docs/reference.md), built strictly: a broken
# link or anchor fails the build (mkdocs.yml). From a fresh clone it creates .venv-docs and
# installs the `docs` extra into it (about 20 s); SQLQUEUE_DOCS_PYTHON=<python> builds with that
# interpreter's packages instead (tests/docs runs the README's command so, with the test pass's),
# and SQLQUEUE_DOCS_SITE=<dir> writes elsewhere. It ends by checking that the search index has a
# setting's name in it, the word a user would search for, and that the Python API was generated.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${SQLQUEUE_DOCS_PYTHON:-}
if [ -z "$python" ]; then
  if [ ! -x .venv-docs/bin/python ]; then
    echo "==> Creating .venv-docs"
    "${PYTHON:-python3}" -m venv .venv-docs
  fi
  echo "==> Installing the docs extra into .venv-docs"
  .venv-docs/bin/python -m pip install -q --disable-pip-version-check -e '.[docs]'
  python=.venv-docs/bin/python
fi
site=${SQLQUEUE_DOCS_SITE:-site}
# NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2, printed on every build.
NO_MKDOCS_2_WARNING=1 "$python" -m mkdocs build --strict --quiet --site-dir "$site"
if ! grep -q max_interruptions "$site/search/search_index.json"; then
  echo "error: the search index of $site lacks max_interruptions" >&2
  exit 1
fi
if ! grep -q "django_sqlqueue.registry.job" "$site/reference/index.html"; then
  echo "error: $site/reference/index.html lacks the API generated from the docstrings" >&2
  exit 1
fi
echo "==> The docs are in $site/: open $site/index.html"
