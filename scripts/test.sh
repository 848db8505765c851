#!/usr/bin/env bash
# The whole test suite, as CI runs it: lint, migrations check, then the tests against SQLite and
# against PostgreSQL (a throwaway cluster the suite starts itself, unless DATABASE_URL is set).
# Works on a fresh machine: it creates .venv, installs the test dependencies, and (as root on
# Debian/Ubuntu) installs the PostgreSQL server if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

have_postgres() {
  command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}
if [ -z "${DATABASE_URL:-}" ] && ! have_postgres; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> PostgreSQL server not found: installing it with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "PostgreSQL server binaries (initdb, pg_ctl) not found. Install them" \
         "(sudo apt-get install postgresql) or set DATABASE_URL to a server." >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "==> Creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
echo "==> Installing django-sqlqueue with its test dependencies"
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'

echo "==> ruff"
.venv/bin/ruff check .
echo "==> makemigrations --check"
SQLQUEUE_TEST_DATABASE=sqlite .venv/bin/python -m django makemigrations --check --dry-run \
  --settings=tests.settings

status=0
echo "==> Tests on SQLite"
SQLQUEUE_TEST_DATABASE=sqlite .venv/bin/pytest "$@" || status=$?
echo "==> Tests on PostgreSQL"
SQLQUEUE_TEST_DATABASE=postgresql .venv/bin/pytest "$@" || status=$?
exit $status
