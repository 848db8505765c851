#!/usr/bin/env bash
# The whole test suite, as CI runs it: lint and a migrations check, then every test against SQLite,
# PostgreSQL (a throwaway cluster each pytest run starts itself, unless DATABASE_URL is set) and
# MariaDB. What runs where:
#   - Django 6.1 on Python 3.12+ (.venv-django6): everything, including the django.tasks backend,
#     the chaos suite, the browser test and the slow tests: on SQLite; on MariaDB
#     (tests/mariadb_server.py, a throwaway server each pytest run starts itself) all but the
#     browser test, in two runs (chaos, the rest); on PostgreSQL the chaos suite, the
#     django.tasks backend and the admin (the rest runs there with Django 5.2);
#   - Django 5.2 LTS on python3 (.venv): on PostgreSQL, everything but the chaos suite and the
#     browser test: the unit and integration tests, the worker process tests with the slow ones;
#     on SQLite, the tests that touch Django's APIs (unit, integration, admin);
#   - Django 6.0 on Python 3.13 (.venv-django60): the tests that touch Django's APIs (unit,
#     integration, admin, the django.tasks backend), on SQLite;
#   - Django 6.1 again, on PostgreSQL through a PgBouncer in transaction pooling mode
#     (tests/pgbouncer.py): the integration and process tests and the chaos scenarios about
#     connections (outages, the state machine, transactional enqueues), minus the slow ones.
#   - Django 6.1 again, the docs (tests/docs, on settings of their own, tests/docs/settings.py):
#     every snippet of README.md and docs/*.md, the facts they state, the strict build of the
#     site (scripts/docs.sh) on SQLite; the pages about PostgreSQL on PostgreSQL.
#   The worker runs as a subprocess, the same code on every Django: each process test runs once
#   on each database (PostgreSQL: Django 5.2; PgBouncer, MariaDB, SQLite: Django 6.1), so that
#   both the LTS and the newest Django run real workers; the chaos suite runs on 6.1 on each.
# The passes are independent pytest runs that spend most of their time waiting on worker
# subprocesses, servers and timeouts, not on the CPU (one at a time, the Django 6.1 SQLite pass
# used 100 s of CPU in 464 s): they run SQLQUEUE_TEST_JOBS at a time (default 3; 1 runs them one
# after the other), longest first. Each run has its own throwaway PostgreSQL cluster (its own port
# and temp dir) and its own SQLite files (named after its pid), so concurrent runs share nothing.
# Each pass writes its own log, printed whole when the pass ends ("==> <pass>: FAILED ..."
# before a failing one's); a table at the end gives each pass's result, minutes and CPU minutes
# (each test's seconds, and CPU seconds with its workers', are in a JUnit XML file beside its log).
# Works on a fresh machine: it creates the virtualenvs, installs the test dependencies and, as root
# on Debian/Ubuntu, installs what is missing with apt-get (PostgreSQL, PgBouncer, MariaDB and
# the headers mysqlclient builds against, Chromium).
# SQLQUEUE_NO_INSTALL=1 uses the virtualenvs as they are (no pip), where they exist.
# Extra arguments go to every pytest run, e.g. `bash scripts/test.sh -x -k notify` (a pass in which
# they select no test says "no tests" and does not fail the run).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib.sh  # apt_install, have_postgres, have_pgbouncer, have_mariadb, python_at_least,
                       # run_jobs

started=$SECONDS
if [ -z "${DATABASE_URL:-}" ] && ! have_postgres; then
  apt_install "PostgreSQL server (initdb, pg_ctl)" postgresql || {
    echo "Or set DATABASE_URL to a PostgreSQL server you run." >&2; exit 1; }
fi
if [ -z "${DATABASE_URL:-}" ] && ! have_pgbouncer; then
  apt_install "PgBouncer (for the pgbouncer pass)" pgbouncer || {
    echo "The pgbouncer pass will fail without it." >&2; }
fi
# MariaDB: the server for the mariadb pass (tests/mariadb_server.py) and the headers that
# mysqlclient (in the mariadb extra) is built against.
if ! have_mariadb; then
  apt_install "MariaDB server (mariadbd, mariadb-install-db)" mariadb-server || {
    echo "The mariadb pass will fail without it." >&2; }
fi
if ! have_mariadb_headers; then
  apt_install "MariaDB client headers (to build mysqlclient)" libmariadb-dev pkg-config gcc || {
    echo "pip cannot build mysqlclient without them." >&2; exit 1; }
fi

# jq: docs/observability.md pipes `manage.py stats --json` into it, and tests/docs runs that.
if ! command -v jq >/dev/null; then
  apt_install "jq (for a docs example)" jq || echo "The docs pass will fail without it." >&2
fi

# The admin's browser test (tests/admin/test_browser.py) drives Debian's Chromium through its
# driver. Without them that test fails, saying so; SQLQUEUE_SKIP_BROWSER=1 skips it instead.
if [ "${SQLQUEUE_SKIP_BROWSER:-}" != 1 ] && { [ ! -x "${SQLQUEUE_CHROMIUM:-/usr/bin/chromium}" ] ||
    [ ! -x "${SQLQUEUE_CHROMEDRIVER:-/usr/bin/chromedriver}" ]; }; then
  apt_install "Chromium or its driver (for the browser test)" chromium chromium-driver ||
    echo "The browser test will fail without them (SQLQUEUE_SKIP_BROWSER=1 skips it)." >&2
fi

make_venv() {  # make_venv DIR PYTHON DJANGO_SPEC EXTRAS
  if [ "${SQLQUEUE_NO_INSTALL:-}" = 1 ] && [ -x "$1/bin/pytest" ]; then
    echo "==> SQLQUEUE_NO_INSTALL=1: using $1 as it is"
    return
  fi
  if [ ! -x "$1/bin/python" ]; then
    echo "==> Creating $1 with $("$2" --version)"
    "$2" -m venv "$1"
  fi
  echo "==> Installing django-sqlqueue[$4] and $3 into $1"
  "$1/bin/python" -m pip install -q --disable-pip-version-check -e ".[$4]" "$3"
}

PY312=$(python_at_least 3.12) || {
  echo "No Python 3.12+ found for the Django 6 pass (pyenv install 3.12, or put python3.12 on" \
       "PATH)." >&2
  exit 1
}
PY313=$(python_at_least 3.13) || PY313=$PY312
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/sqlqueue-test-logs.XXXXXX")"
# The three virtualenvs at once: mostly downloads and unpacking, each into its own directory.
# (About 30 s each from scratch with a warm pip cache; 5 s each when they exist.)
# test: SQLite and PostgreSQL, in every one; mariadb (mysqlclient, built from source) and docs (the
# site the docs pass builds) only where the MariaDB and docs passes run, .venv-django6.
RUN_JOBS_NO_TESTS_FAILS=1 run_jobs "$LOGS" 3 \
  "venv .venv-django6" \
  "make_venv .venv-django6 $(printf %q "$PY312") 'Django>=6.1,<6.2' test,mariadb,docs" \
  "venv .venv-django60" "make_venv .venv-django60 $(printf %q "$PY313") 'Django>=6.0,<6.1' test" \
  "venv .venv" "make_venv .venv $(printf %q "${PYTHON:-python3}") 'Django>=5.2,<5.3' test" || exit 1

# Bytecode of the package and the tests, written once for each Python: where
# PYTHONDONTWRITEBYTECODE is set (as on CI's machines), every worker subprocess would otherwise
# compile the sixty-odd modules it imports again (0.1 s of CPU at each start).
for venv in .venv .venv-django60 .venv-django6; do
  "$venv/bin/python" -m compileall -q -j 0 django_sqlqueue tests >/dev/null
done

echo "==> ruff"
.venv/bin/ruff check .
echo "==> makemigrations --check (Django 5.2, 6.0 and 6.1)"
for venv in .venv .venv-django60 .venv-django6; do
  SQLQUEUE_TEST_DATABASE=sqlite "$venv/bin/python" -m django makemigrations --check --dry-run \
    --settings=tests.settings
done

# The passes, longest first, as run_jobs starts them as slots free up. In brackets, their minutes
# three at a time in a CI run of 2026-11-26 (57.6 minutes of passes, 19.6 of wall time), then
# estimated from its --durations for this split, the process tests once a database and the
# faster chaos and race tests (43.8 minutes of passes, about 15 of wall time).
quote() { [ $# = 0 ] || printf '%q ' "$@"; }  # (printf alone would give '' for no argument)
pytest_args=$(quote "$@")
passes=()
add_pass() {  # add_pass LABEL VENV DATABASE PYTEST_ARGS...
  local label=$1 venv=$2 database=$3
  shift 3
  # --durations: each log ends with its slowest tests, to see where the minutes go; every test's
  # seconds (setup and teardown included) are in the JUnit XML beside the log.
  passes+=("$label" "SQLQUEUE_TEST_DATABASE=$database $venv/bin/pytest --durations=15 \
--junitxml=$LOGS/$(_run_jobs_slug "$label").xml $(quote "$@")$pytest_args")
}
# [7.4 without the slow ones; 9.5] The worker process tests on PostgreSQL (here only), the slow
# ones included: a minute of schedule ticks, the wake-up herd.
add_pass "Django 5.2 PostgreSQL" .venv postgresql --ignore=tests/chaos -m "not browser"
# [26.6 with all the chaos suite] Through the pooler: what a transaction-mode pooler could
# break (statements, session state, connections lost and refused), not the kills and races that
# the chaos suite repeats on each database.
if [ -z "${DATABASE_URL:-}" ]; then
  add_pass "Django 6.1 PgBouncer" .venv-django6 pgbouncer \
    tests/integration tests/process tests/chaos/test_state_machine.py \
    tests/chaos/test_database_outages.py tests/chaos/test_transactional_enqueue.py \
    tests/chaos/test_worker_start_outage.py -m "not slow"
fi
add_pass "Django 6.1 SQLite" .venv-django6 sqlite  # [8.2; 7.5]
# [6.9; 6.3]
add_pass "Django 6.1 MariaDB" .venv-django6 mariadb --ignore=tests/chaos -m "not browser"
add_pass "Django 6.1 MariaDB chaos" .venv-django6 mariadb tests/chaos  # [5.0; 2.9]
# [3.3; 2.8] The failover scenario, tests/chaos/test_failover.py, runs here only: it starts a
# primary and a standby of its own, twice, about a minute in all.
add_pass "Django 6.1 PostgreSQL chaos" .venv-django6 postgresql tests/chaos
# [10.8 with the unit and integration tests, which the Django 5.2 PostgreSQL pass runs] What
# Django 6 adds on PostgreSQL: the django.tasks backend, and the admin on the newest Django.
add_pass "Django 6.1 PostgreSQL" .venv-django6 postgresql tests/tasks_backend tests/admin \
  -m "not browser"
# [about 1.5, new] The docs: every snippet of README.md and docs/*.md run in a site of their own
# (tests/docs/settings.py), the facts the docs state checked against the code, and the site
# built strictly (scripts/docs.sh); the pages about PostgreSQL in the PostgreSQL docs pass.
add_pass "Django 6.1 SQLite docs" .venv-django6 sqlite --ds=tests.docs.settings tests/docs
add_pass "Django 6.1 PostgreSQL docs" .venv-django6 postgresql --ds=tests.docs.settings \
  tests/docs/test_snippets.py
# [3.3] Django 6.0 on SQLite only: what differs between Django releases is in Django's APIs,
# which these tests touch; the database-specific SQL runs on Django 6.1 and 5.2.
add_pass "Django 6.0 SQLite" .venv-django60 sqlite \
  tests/unit tests/integration tests/admin tests/tasks_backend -m "not browser and not slow"
# [4.2 with its process tests, which run in the Django 6.1 SQLite pass; 1.0]
add_pass "Django 5.2 SQLite" .venv sqlite --ignore=tests/chaos --ignore=tests/process \
  -m "not browser and not slow"

status=0
# Without extra arguments, a pass that collects no test is broken: it fails.
RUN_JOBS_NO_TESTS_FAILS=$([ $# = 0 ] && echo 1 || echo 0) \
  run_jobs "$LOGS" "${SQLQUEUE_TEST_JOBS:-3}" "${passes[@]}" || status=$?
echo "==> scripts/test.sh: $((SECONDS - started))s in all (logs in $LOGS)"
exit $status
