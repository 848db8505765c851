#!/usr/bin/env bash
# The django-sqlqueue demo, from a fresh clone: bash scripts/demo.sh
#
# Needs only python3 (3.10 or newer). Creates .venv in the repository if it is missing, installs
# the package with its example extra into it, migrates the example project's database and runs
# `manage.py demo` there.
#
# The database is example_project/demo.sqlite3 unless DATABASE_URL is set, e.g.
#   DATABASE_URL=postgres://user:password@localhost:5432/shop bash scripts/demo.sh
# (the PostgreSQL driver is then installed too). Set PYTHON to use another interpreter.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"

step() { printf '\n==> %s\n' "$*"; }

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "error: $PYTHON not found; install Python 3.10 or newer." >&2
    exit 1
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "error: $("$PYTHON" --version 2>&1) is too old; django-sqlqueue needs Python 3.10+." >&2
    exit 1
fi

if [ ! -x .venv/bin/python ]; then
    step "Creating a virtual environment in .venv ($("$PYTHON" --version 2>&1))"
    if ! "$PYTHON" -m venv .venv; then
        echo "error: could not create .venv; on Debian/Ubuntu: apt-get install python3-venv" >&2
        exit 1
    fi
else
    step "Using the existing virtual environment in .venv"
fi

extras="example"
if [ -n "${DATABASE_URL:-}" ]; then
    case "$DATABASE_URL" in
        postgres://* | postgresql://* | pgsql://*) extras="example,postgres" ;;
    esac
fi
step "Installing django-sqlqueue[$extras] into .venv (editable)"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[$extras]"

cd example_project
if [ -n "${DATABASE_URL:-}" ]; then
    # Only the scheme: the URL may hold a password.
    step "Database: DATABASE_URL (${DATABASE_URL%%:*})"
else
    step "Database: example_project/demo.sqlite3 (set DATABASE_URL to use another one)"
fi
step "Migrating: manage.py migrate"
../.venv/bin/python manage.py migrate --noinput

step "Running the demo: manage.py demo"
../.venv/bin/python manage.py demo
