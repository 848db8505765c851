#!/usr/bin/env bash
# The whole test suite, as CI runs it: lint and a migrations check, then every test against SQLite
# and against PostgreSQL (a throwaway cluster the suite starts itself, unless DATABASE_URL is set),
# in three passes:
#   - Django 6.x on Python 3.12+ (.venv-django6): everything, including the django.tasks backend,
#     the chaos suite and the browser test;
#   - Django 5.2 LTS on python3 (.venv): everything but the chaos suite, the browser test and the
#     slow tests (the racing limits test, the minute-long schedule test);
#   - Django 6.0 on Python 3.13 (.venv-django60): the same, without the worker's process tests;
# then, with Django 6.1, the integration, process and chaos tests once more on PostgreSQL through
# a PgBouncer in transaction pooling mode (tests/pgbouncer.py), minus the slow ones; and the
# whole suite on MariaDB (tests/mariadb_server.py).
# Works on a fresh machine: it creates the virtualenvs, installs the test dependencies and, as root
# on Debian/Ubuntu, installs what is missing with apt-get (PostgreSQL, Chromium).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -x -k notify`.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib.sh  # apt_install, have_postgres, have_pgbouncer, have_mariadb, python_at_least

if [ -z "${DATABASE_URL:-}" ] && ! have_postgres; then
  apt_install "PostgreSQL server (initdb, pg_ctl)" postgresql || {
    echo "Or set DATABASE_URL to a PostgreSQL server you run." >&2; exit 1; }
fi
if [ -z "${DATABASE_URL:-}" ] && ! have_pgbouncer; then
  apt_install "PgBouncer (for the pgbouncer pass)" pgbouncer || {
    echo "The pgbouncer pass will fail without it." >&2; }
fi
# MariaDB: the server for the mariadb pass (tests/mariadb_server.py) and the headers that
# mysqlclient (in the test extra) is built against.
if ! have_mariadb; then
  apt_install "MariaDB server (mariadbd, mariadb-install-db)" mariadb-server || {
    echo "The mariadb pass will fail without it." >&2; }
fi
if ! have_mariadb_headers; then
  apt_install "MariaDB client headers (to build mysqlclient)" libmariadb-dev pkg-config gcc || {
    echo "pip cannot build mysqlclient without them." >&2; exit 1; }
fi

# The admin's browser test (tests/admin/test_browser.py) drives Debian's Chromium through its
# driver. Without them that test fails, saying so; SQLQUEUE_SKIP_BROWSER=1 skips it instead.
if [ "${SQLQUEUE_SKIP_BROWSER:-}" != 1 ] && { [ ! -x "${SQLQUEUE_CHROMIUM:-/usr/bin/chromium}" ] ||
    [ ! -x "${SQLQUEUE_CHROMEDRIVER:-/usr/bin/chromedriver}" ]; }; then
  apt_install "Chromium or its driver (for the browser test)" chromium chromium-driver ||
    echo "The browser test will fail without them (SQLQUEUE_SKIP_BROWSER=1 skips it)." >&2
fi

make_venv() {  # make_venv DIR PYTHON DJANGO_SPEC
  if [ ! -x "$1/bin/python" ]; then
    echo "==> Creating $1 with $("$2" --version)"
    "$2" -m venv "$1"
  fi
  echo "==> Installing django-sqlqueue, its test dependencies and $3 into $1"
  "$1/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]' "$3"
}

status=0
run_pass() {  # run_pass VENV LABEL PYTEST_ARGS...
  local venv=$1 label=$2
  shift 2
  echo "==> $label: tests on SQLite"
  SQLQUEUE_TEST_DATABASE=sqlite "$venv/bin/pytest" "$@" || status=$?
  echo "==> $label: tests on PostgreSQL"
  SQLQUEUE_TEST_DATABASE=postgresql "$venv/bin/pytest" "$@" || status=$?
}

PY312=$(python_at_least 3.12) || {
  echo "No Python 3.12+ found for the Django 6 pass (pyenv install 3.12, or put python3.12 on" \
       "PATH)." >&2
  exit 1
}
PY313=$(python_at_least 3.13) || PY313=$PY312
make_venv .venv-django6 "$PY312" "Django>=6.1,<6.2"
make_venv .venv-django60 "$PY313" "Django>=6.0,<6.1"
make_venv .venv "${PYTHON:-python3}" "Django>=5.2,<5.3"

echo "==> ruff"
.venv/bin/ruff check .
echo "==> makemigrations --check (Django 5.2, 6.0 and 6.1)"
for venv in .venv .venv-django60 .venv-django6; do
  SQLQUEUE_TEST_DATABASE=sqlite "$venv/bin/python" -m django makemigrations --check --dry-run \
    --settings=tests.settings
done

run_pass .venv "Django 5.2 LTS" --ignore=tests/chaos -m "not browser and not slow" "$@"
# Django 6.0 sits between the two: the tests that touch Django's APIs (unit, integration, admin,
# the django.tasks backend). The worker as a subprocess, the same code on every Django, runs in
# the 5.2 and 6.1 passes.
run_pass .venv-django60 "Django 6.0" tests/unit tests/integration tests/admin tests/tasks_backend \
  -m "not browser and not slow" "$@"
run_pass .venv-django6 "Django 6.1" "$@"
if [ -z "${DATABASE_URL:-}" ]; then
  echo "==> Django 6.1: integration, process and chaos tests through PgBouncer (transaction mode)"
  SQLQUEUE_TEST_DATABASE=pgbouncer .venv-django6/bin/pytest tests/integration tests/process \
    tests/chaos -m "not slow" "$@" || status=$?
fi
# ---- MariaDB (issue 19): Django 6.1, the whole suite but the browser test, on a throwaway
# server the suite starts itself (tests/mariadb_server.py), never skipped. About 6 minutes.
echo "==> Django 6.1: tests on MariaDB"
SQLQUEUE_TEST_DATABASE=mariadb .venv-django6/bin/pytest -m "not browser" "$@" || status=$?
exit $status
