#!/usr/bin/env bash
# What users get: build the sdist and the wheel of this checkout, check what they hold, then
# install the wheel alone into clean virtualenvs and run a new user's site on it.
#
#   1. A throwaway build virtualenv: `python -m build` (no deprecation warnings allowed),
#      `twine check --strict`, and both archives must hold every admin template, every
#      migration, py.typed and LICENSE.
#   2. SQLite: a clean virtualenv with python3 and the wheel without extras (so no psycopg).
#      tests/install_site, copied to a temp dir outside the checkout, runs there: runworker
#      before migrate (one line naming migrate, status 1), migrate, check, makemigrations
#      --check, enqueue, runworker --burst, the jobs' effects, stats, and every admin page of
#      the app (200, rendered from the templates in the virtualenv).
#   3. PostgreSQL: the same with Python 3.12+ and the wheel with its postgres extra, against a
#      throwaway server started by tests/postgres_cluster.py (as root on Debian/Ubuntu, the
#      PostgreSQL server is installed with apt-get if it is missing).
#   4. scripts/new_user_walkthrough.sh on the same wheel: docs/getting-started.md followed step
#      by step from `django-admin startproject`, on SQLite.
#
# Nothing is installed into the checkout and nothing from it is on the site's sys.path. Set
# PYTHON for the interpreter of steps 1 and 2 (default python3); SQLQUEUE_KEEP_TMP=1 keeps the
# temp dir.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/lib.sh  # apt_install, have_postgres, python_at_least

step() { printf '==> %s\n' "$*"; }
fail() { printf 'check_install.sh: FAILED: %s\n' "$*" >&2; exit 1; }

unset PYTHONPATH
export PIP_DISABLE_PIP_VERSION_CHECK=1
PYTHON="${PYTHON:-python3}"
started=$SECONDS
tmp="$(mktemp -d "${TMPDIR:-/tmp}/sqlqueue-install.XXXXXX")"
pg_pid=""
cleanup() {
  if [ -n "$pg_pid" ]; then
    kill -TERM "$pg_pid" 2>/dev/null || true
    wait "$pg_pid" 2>/dev/null || true
  fi
  if [ "${SQLQUEUE_KEEP_TMP:-}" = 1 ]; then
    echo "(kept $tmp)"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pip_install() {  # pip_install PYTHON ARGS...: quiet; pip's cache makes a second run fast
  local status=0
  "$1" -m pip install -q "${@:2}" 2>"$tmp/pip.err" || status=$?
  # Less the notes about an --extra-index-url or --find-links dir that is absent (a pip.conf).
  grep -v "is ignored: it is neither a file nor a directory" "$tmp/pip.err" >&2 || true
  return $status
}

# ---- 1. build and inspect ------------------------------------------------------------------
step "Creating a build virtualenv with $("$PYTHON" --version 2>&1) in $tmp/build-venv"
"$PYTHON" -m venv "$tmp/build-venv" ||
  fail "could not create a virtualenv with $PYTHON (Debian/Ubuntu: apt-get install python3-venv)"
BUILD_PY="$tmp/build-venv/bin/python"
step "Installing build and twine into it"
pip_install "$BUILD_PY" build twine || fail "pip install build twine (above)"

# Built from a copy of what git would commit (tracked files and new ones it does not ignore), so
# leftovers in the checkout (an old *.egg-info/SOURCES.txt, build/) cannot hide a missing file.
src="$tmp/src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  step "Copying the files git would commit (tracked and new, not ignored) to $src"
  mkdir "$src"
  git ls-files -z --cached --others --exclude-standard |
    "$BUILD_PY" -c '
import os, shutil, sys
dest = sys.argv[1]
for name in sys.stdin.buffer.read().decode().split("\0"):
    if name and os.path.isfile(name):  # a tracked file deleted in the work tree is gone
        os.makedirs(os.path.join(dest, os.path.dirname(name)), exist_ok=True)
        shutil.copy2(name, os.path.join(dest, name))
' "$src"
else
  step "Not a git checkout: building from $ROOT as it is"
  src="$ROOT"
fi

step "Building the sdist and the wheel (python -m build) into $tmp/dist"
if ! "$BUILD_PY" -m build --outdir "$tmp/dist" "$src" >"$tmp/build.log" 2>&1; then
  tail -n 40 "$tmp/build.log" >&2
  fail "python -m build failed (its last lines are above)"
fi
if grep -i "deprecat" "$tmp/build.log" >&2; then
  fail "the build printed deprecation warnings (above): fix pyproject.toml"
fi
wheel="$(ls "$tmp"/dist/*.whl)"
sdist="$(ls "$tmp"/dist/*.tar.gz)"
echo "    built $(basename "$wheel") and $(basename "$sdist"), no deprecation warning"

step "twine check --strict (the metadata, and the README as PyPI renders it)"
COLUMNS=200 "$tmp/build-venv/bin/twine" --no-color check --strict "$wheel" "$sdist" ||
  fail "twine check --strict (above)"

step "Checking that the wheel and the sdist hold every template, migration, py.typed and LICENSE"
"$BUILD_PY" - "$src" "$wheel" "$sdist" <<'PY' || fail "the archives lack files (listed above)"
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

src, wheel, sdist = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
package = src / "django_sqlqueue"
templates = sorted(p for p in (package / "templates").rglob("*") if p.is_file())
templates += sorted(p for p in (package / "static").rglob("*") if p.is_file())
migrations = sorted((package / "migrations").glob("*.py"))
if not templates or len(migrations) < 2:
    sys.exit(f"found no templates or migrations under {package}: is this the right checkout?")
expected = [p.relative_to(src).as_posix() for p in templates + migrations]
expected.append("django_sqlqueue/py.typed")
print(f"    expected: {len(templates)} templates, {len(migrations)} migration modules "
      "(__init__.py included), django_sqlqueue/py.typed and LICENSE:")
for name in expected:
    print(f"      {name}")

with zipfile.ZipFile(wheel) as archive:
    in_wheel = set(archive.namelist())
    metadata_name = next(n for n in in_wheel if n.endswith(".dist-info/METADATA"))
    metadata = Parser().parsestr(archive.read(metadata_name).decode())
with tarfile.open(sdist) as archive:  # every member is under <name>-<version>/
    in_sdist = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}

problems = [f"missing from the wheel: {name}" for name in expected if name not in in_wheel]
if not any(n.endswith((".dist-info/licenses/LICENSE", ".dist-info/LICENSE")) for n in in_wheel):
    problems.append("missing from the wheel: LICENSE (in its .dist-info)")
problems += [f"missing from the sdist: {name}" for name in [*expected, "LICENSE"]
             if name not in in_sdist]
if metadata["License-Expression"] != "BSD-3-Clause":
    problems.append(f"wheel metadata: License-Expression is {metadata['License-Expression']!r}")
if metadata["Description-Content-Type"] != "text/markdown":
    problems.append("wheel metadata: Description-Content-Type is "
                    f"{metadata['Description-Content-Type']!r}, not text/markdown")
license_classifiers = [c for c in metadata.get_all("Classifier") or [] if c.startswith("License ::")]
if license_classifiers:
    problems.append(f"wheel metadata: License classifiers beside the SPDX expression: "
                    f"{license_classifiers}")
for problem in problems:
    print(f"    {problem}", file=sys.stderr)
if problems:
    sys.exit(1)
print("    the wheel and the sdist hold all of them; metadata: License-Expression BSD-3-Clause, "
      "README as text/markdown")
PY

# ---- 2 and 3. a new user's site on the installed wheel -------------------------------------
run_site() {  # run_site LABEL PYTHON PIP_SPEC EXPECTED_DATABASE [DATABASE_URL]
  local label=$1 python=$2 spec=$3 expect=$4 url=${5:-}
  local venv="$tmp/venv-$expect" site="$tmp/site-$expect"
  site_run() {
    if [ -n "$url" ]; then
      (cd "$site" && env -u PYTHONPATH DATABASE_URL="$url" SITE_CHECKOUT="$ROOT" \
        SITE_EXPECT_DATABASE="$expect" "$venv/bin/python" "$@")
    else
      (cd "$site" && env -u PYTHONPATH -u DATABASE_URL SITE_CHECKOUT="$ROOT" \
        SITE_EXPECT_DATABASE="$expect" "$venv/bin/python" "$@")
    fi
  }

  step "$label: a clean virtualenv with $("$python" --version 2>&1) in $venv"
  "$python" -m venv "$venv" || fail "$label: could not create a virtualenv with $python"
  step "$label: pip install $(basename "$spec") (the built wheel, nothing else of the checkout)"
  pip_install "$venv/bin/python" "$spec" || fail "$label: pip install $spec (above)"
  step "$label: copying the new user's site (tests/install_site) to $site"
  cp -R tests/install_site "$site"
  rm -rf "$site"/db.sqlite3* "$site"/worker.log
  find "$site" -name __pycache__ -prune -exec rm -rf {} +

  step "$label: where django_sqlqueue is imported from (check_site.py installed)"
  site_run check_site.py installed || fail "$label: the installed package (above)"
  step "$label: manage.py runworker before migrate (a newcomer's slip): one line that says migrate"
  local said status=0
  said="$(site_run manage.py runworker --burst 2>&1)" || status=$?
  printf '    %s\n' "$said"
  [ "$status" = 1 ] && [ "$(printf '%s\n' "$said" | wc -l)" = 1 ] &&
    printf '%s\n' "$said" | grep -qF 'run `python manage.py migrate` first.' ||
    fail "$label: runworker before migrate exited $status without the one line naming migrate"
  step "$label: manage.py migrate"
  site_run manage.py migrate --noinput 2>&1 | sed 's/^/    /' || fail "$label: manage.py migrate"
  step "$label: manage.py check --database default (no warning either)"
  site_run manage.py check --database default --fail-level WARNING ||
    fail "$label: manage.py check (above)"
  step "$label: manage.py makemigrations --check (the wheel's migrations match its models)"
  site_run manage.py makemigrations --check --dry-run ||
    fail "$label: the installed models need migrations the wheel does not ship"
  step "$label: enqueueing a job that writes a Note and one that fails (check_site.py enqueue)"
  site_run check_site.py enqueue || fail "$label: enqueue (above)"
  step "$label: manage.py runworker --burst"
  site_run manage.py runworker --burst --concurrency 2 2>&1 | sed 's/^/    /' ||
    fail "$label: manage.py runworker --burst (above)"
  step "$label: the jobs ran: the Note is there, the rows say succeeded and exhausted"
  site_run check_site.py jobs-done || fail "$label: the jobs' effects (above)"
  step "$label: manage.py queues limit bulk --concurrency 5 --create; manage.py queues; manage.py stats"
  site_run manage.py queues limit bulk --concurrency 5 --create 2>&1 | sed 's/^/    /' ||
    fail "$label: manage.py queues limit (above)"
  site_run manage.py queues 2>&1 | sed 's/^/    /' || fail "$label: manage.py queues (above)"
  site_run manage.py stats --json | "$venv/bin/python" -m json.tool >/dev/null ||
    fail "$label: manage.py stats --json did not print one JSON document"
  site_run manage.py stats 2>&1 | sed 's/^/    /' || fail "$label: manage.py stats (above)"
  step "$label: every admin page of the app, as a superuser, with a live worker"
  site_run check_site.py admin || fail "$label: the admin pages (above)"
}

run_site "SQLite" "$PYTHON" "$wheel" sqlite

PY312="$(python_at_least 3.12)" ||
  fail "no Python 3.12+ found for the PostgreSQL pass (pyenv install 3.12, or put python3.12 on PATH)"
if ! have_postgres; then
  apt_install "PostgreSQL server (initdb, pg_ctl)" postgresql ||
    fail "the PostgreSQL pass needs the PostgreSQL server binaries (initdb, pg_ctl)"
fi
step "PostgreSQL: starting a throwaway server (tests/postgres_cluster.py)"
# The helper process alone gets the checkout's tests/ dir on its path; it stops and deletes the
# server when this script's cleanup sends SIGTERM, or when this script is gone.
"$BUILD_PY" - "$ROOT/tests" "$tmp/pg.port" >"$tmp/pg.log" 2>&1 <<'PY' &
import os
import signal
import sys
import time

sys.path.insert(0, sys.argv[1])
from postgres_cluster import Cluster  # noqa: E402

signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
parent = os.getppid()
cluster = Cluster()
try:
    cluster.start()
    cluster.wait_ready()
    with open(sys.argv[2] + ".tmp", "w") as out:
        out.write(str(cluster.port))
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])
    while os.getppid() == parent:
        time.sleep(0.5)
finally:
    cluster.destroy()
PY
pg_pid=$!
for _ in $(seq 600); do
  [ -s "$tmp/pg.port" ] && break
  if ! kill -0 "$pg_pid" 2>/dev/null; then
    cat "$tmp/pg.log" >&2
    fail "the throwaway PostgreSQL server did not start (above)"
  fi
  sleep 0.1
done
[ -s "$tmp/pg.port" ] || { cat "$tmp/pg.log" >&2; fail "PostgreSQL: no server after 60s"; }
port="$(cat "$tmp/pg.port")"
echo "    PostgreSQL is up on 127.0.0.1:$port"

run_site "PostgreSQL" "$PY312" "$wheel[postgres]" postgresql \
  "postgres://postgres@127.0.0.1:$port/postgres"

step "A new user's walk-through of docs/getting-started.md on the same wheel (SQLite)"
SQLQUEUE_WHEEL="$wheel" PYTHON="$PYTHON" bash scripts/new_user_walkthrough.sh ||
  fail "scripts/new_user_walkthrough.sh (above)"

step "All install checks passed in $((SECONDS - started))s"
