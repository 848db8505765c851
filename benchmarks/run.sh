#!/usr/bin/env bash
# The benchmark suite, start to finish: `bash benchmarks/run.sh` (see benchmarks/README.md).
#
# 1. Makes one virtualenv per system under benchmarks/.venvs/<system> (Python 3.12+, pinned
#    versions from benchmarks/requirements/<system>.txt; django-sqlqueue editable from this
#    checkout). A system whose install fails is reported as n/a with pip's reason.
# 2. Runs benchmarks/run.py in django-sqlqueue's virtualenv: a throwaway PostgreSQL (fsync on) and
#    a throwaway Redis (for Celery and RQ; redis-server is installed with apt-get when missing),
#    every scenario for every system, pgbench, then the MariaDB phase (a throwaway MariaDB server
#    for django-sqlqueue, django-tasks-db, dj-queue and django-q2; mariadb-server and
#    libmariadb-dev are installed with apt-get when missing, mysqlclient into those four
#    virtualenvs), then the
#    markdown tables, the results JSON (benchmarks/results/) and the chart
#    (docs/images/benchmarks.png).
# Extra arguments go to run.py, e.g. `bash benchmarks/run.sh --quick --systems sqlqueue,pgqueuer`;
# `--no-mariadb` skips the MariaDB phase and its installs.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
mariadb=1
for arg in "$@"; do
  if [ "$arg" = --no-mariadb ]; then mariadb=0; fi
done
MARIADB_SYSTEMS="sqlqueue django_tasks_db dj_queue django_q2"

if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/pgbench >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> Installing PostgreSQL (server and pgbench) with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql postgresql-contrib >/dev/null
  else
    echo "PostgreSQL server binaries and pgbench are needed (apt-get install postgresql)." >&2
    exit 1
  fi
fi

# Redis for the Redis-backed peers (Celery, RQ): Debian's redis-server binary, which run.py starts
# itself on a free port with its own directory (the package's own service is not used).
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> Installing redis-server with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "redis-server is needed for the Celery and RQ peers (apt-get install redis-server)." >&2
    exit 1
  fi
fi

# MariaDB for the MariaDB phase: Debian's server binaries (run.py starts its own mariadbd, as the
# test suite does; the package's own service is not used), and what mysqlclient builds against.
if [ "$mariadb" = 1 ] && { ! command -v mariadb-install-db >/dev/null 2>&1 \
    || ! command -v mariadb_config >/dev/null 2>&1 || ! command -v pkg-config >/dev/null 2>&1 \
    || ! command -v gcc >/dev/null 2>&1; }; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> Installing mariadb-server and libmariadb-dev with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server libmariadb-dev \
      pkg-config gcc >/dev/null
  else
    echo "MariaDB is needed for the MariaDB phase (apt-get install mariadb-server" \
      "libmariadb-dev pkg-config gcc), or run with --no-mariadb." >&2
    exit 1
  fi
fi

source scripts/lib.sh  # python_at_least
PY=$(python_at_least 3.12) || {
  echo "Python 3.12+ is needed (Django 6, which django-tasks-db requires)." >&2; exit 1; }

VENVS=benchmarks/.venvs
mkdir -p "$VENVS"
make_venv() {  # make_venv NAME PIP_ARGS...
  local name=$1 dir="$VENVS/$1"
  shift
  rm -f "$VENVS/$name.failed"
  if [ ! -x "$dir/bin/python" ]; then
    "$PY" -m venv "$dir"
  fi
  if ! "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@" \
      >"$VENVS/$name.pip.log" 2>&1; then
    grep -E "^ERROR" "$VENVS/$name.pip.log" | tail -n 3 >"$VENVS/$name.failed" \
      || echo "pip install failed" >"$VENVS/$name.failed"
    echo "    $name: install FAILED (reported as n/a): $(head -c 300 "$VENVS/$name.failed")"
    return 0
  fi
  echo "    $name: ready"
}

echo "==> Virtualenvs in $VENVS with $("$PY" --version)"
make_venv sqlqueue -e ".[postgres]" -r benchmarks/requirements/sqlqueue.txt \
  -r benchmarks/requirements/harness.txt &
for peer in pgqueuer oban procrastinate django_tasks_db dj_queue django_q2 raquel chancy celery rq; do
  make_venv "$peer" -r "benchmarks/requirements/$peer.txt" &
done
wait
if [ -f "$VENVS/sqlqueue.failed" ]; then
  echo "django-sqlqueue's own virtualenv failed to install; see $VENVS/sqlqueue.pip.log" >&2
  exit 1
fi
if [ "$mariadb" = 1 ]; then
  # Apart from the virtualenvs above: a system whose driver fails to build is n/a on MariaDB
  # only (run.py reads <name>.mariadb.failed), its PostgreSQL figures still come out.
  echo "==> mysqlclient for the MariaDB phase"
  for name in $MARIADB_SYSTEMS; do
    (
      rm -f "$VENVS/$name.mariadb.failed"
      if [ -f "$VENVS/$name.failed" ]; then exit 0; fi
      if "$VENVS/$name/bin/python" -m pip install -q --disable-pip-version-check \
          -r benchmarks/requirements/mariadb.txt >"$VENVS/$name.mariadb.pip.log" 2>&1; then
        echo "    $name: ready"
      else
        grep -E "^ERROR|error:" "$VENVS/$name.mariadb.pip.log" | tail -n 3 \
          >"$VENVS/$name.mariadb.failed" || echo "pip install failed" >"$VENVS/$name.mariadb.failed"
        echo "    $name: mysqlclient FAILED (n/a on MariaDB): $(head -c 300 "$VENVS/$name.mariadb.failed")"
      fi
    ) &
  done
  wait
fi

# Let the installs' writes reach the disk before anything is timed: a commit waits for its WAL
# flush, and a disk still busy with pip's files would slow whichever system runs first.
sync
for _ in $(seq 1 12); do
  awk '{exit !($1 < 2.0)}' /proc/loadavg && break
  sleep 5
done

"$VENVS/sqlqueue/bin/python" benchmarks/run.py "$@"
echo "Total time, installs included: $(( $(date +%s) - started ))s"
