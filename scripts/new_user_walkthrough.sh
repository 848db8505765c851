#!/usr/bin/env bash
# A new user's first hour, step by step as docs/getting-started.md tells it, on SQLite: a fresh
# virtualenv with the built wheel and no extras, `django-admin startproject`, the settings the
# page shows, `startapp shop` with its Order model and its `@job`, a worker started before
# `migrate` (the slip a newcomer makes: one line naming `manage.py migrate`), `migrate`,
# `check`, an enqueue inside a transaction, `runworker --burst` running it, and `stats`.
#
# SQLQUEUE_WHEEL: the wheel to install (scripts/check_install.sh passes the one it built);
# without it the wheel is built here with `pip wheel --no-deps`. PYTHON: the interpreter
# (default python3). SQLQUEUE_KEEP_TMP=1 keeps the temp dir.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
unset PYTHONPATH DJANGO_SETTINGS_MODULE DATABASE_URL
export PIP_DISABLE_PIP_VERSION_CHECK=1

step() { printf '==> walkthrough: %s\n' "$*"; }
fail() { printf 'new_user_walkthrough.sh: FAILED at "%s"\n' "$*" >&2; exit 1; }
tmp="$(mktemp -d "${TMPDIR:-/tmp}/sqlqueue-walkthrough.XXXXXX")"
cleanup() { if [ "${SQLQUEUE_KEEP_TMP:-}" = 1 ]; then echo "(kept $tmp)"; else rm -rf "$tmp"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM

step "a fresh virtualenv with $("$PYTHON" --version 2>&1) in $tmp/venv"
"$PYTHON" -m venv "$tmp/venv" || fail "python -m venv"
py="$tmp/venv/bin/python"
wheel="${SQLQUEUE_WHEEL:-}"
if [ -z "$wheel" ]; then
  step "pip wheel --no-deps -w dist (the getting-started page's way to build the wheel)"
  "$py" -m pip wheel -q --no-deps -w "$tmp/dist" "$ROOT" >"$tmp/wheel.log" 2>&1 ||
    { tail -n 30 "$tmp/wheel.log" >&2; fail "pip wheel"; }
  wheel="$(ls "$tmp"/dist/*.whl)"
fi
step "pip install $(basename "$wheel") (no extras: Django and the wheel's own dependencies)"
"$py" -m pip install -q "$wheel" 2>"$tmp/pip.err" || { cat "$tmp/pip.err" >&2; fail "pip install the wheel"; }
grep -v "is ignored: it is neither a file nor a directory" "$tmp/pip.err" >&2 || true  # pip.conf

mkdir "$tmp/mysite" && cd "$tmp/mysite"
manage() { "$py" manage.py "$@"; }
step "django-admin startproject mysite ."
"$tmp/venv/bin/django-admin" startproject mysite . || fail "django-admin startproject"
step "python manage.py startapp shop, with the page's Order model (an email)"
manage startapp shop || fail "manage.py startapp shop"
cat >>shop/models.py <<'EOF'


class Order(models.Model):
    email = models.EmailField()
EOF
step "settings.py: INSTALLED_APPS gets django_sqlqueue and shop; SQLite's recommended OPTIONS"
"$py" - mysite/settings.py <<'PY' || fail "editing settings.py"
import re, sys
path = sys.argv[1]
text = open(path).read()
text, apps = re.subn(r"INSTALLED_APPS = \[\n", 'INSTALLED_APPS = [\n    "django_sqlqueue",\n    "shop",\n', text)
text, db = re.subn(r"""(["']NAME["']: BASE_DIR / ["']db.sqlite3["'],\n)""", r'''\1        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL;",
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
        },
''', text)
if apps != 1 or db != 1:
    sys.exit(f"startproject's settings.py changed shape: INSTALLED_APPS {apps}, DATABASES {db}")
open(path, "w").write(text)
PY
step "shop/tasks.py: the page's @job send_receipt"
cat >shop/tasks.py <<'EOF'
from django_sqlqueue import job


@job
def send_receipt(order_id):
    from .models import Order

    order = Order.objects.get(pk=order_id)
    # ... send the e-mail ...
    return {"sent_to": order.email}
EOF
step "python manage.py makemigrations shop"
manage makemigrations shop | sed 's/^/    /' || fail "manage.py makemigrations shop"

step "python manage.py runworker --burst BEFORE migrate (the forgotten step): a non-zero status and one line naming migrate"
status=0
said="$(manage runworker --burst 2>&1)" || status=$?
printf '    %s\n' "$said"
[ "$status" != 0 ] && [ "$(printf '%s\n' "$said" | wc -l)" = 1 ] &&
  printf '%s\n' "$said" | grep -qF 'run `python manage.py migrate` first.' ||
  fail "runworker before migrate (exited $status; expected one line naming manage.py migrate)"

step "python manage.py migrate"
manage migrate --noinput | sed 's/^/    /' || fail "manage.py migrate"
step "python manage.py check --database default (no warning: the SQLite options are set)"
manage check --database default --fail-level WARNING || fail "manage.py check --database default"

step "enqueue send_receipt inside the transaction that creates the Order (manage.py shell -c)"
manage shell -v 0 -c '
from django.db import transaction
from shop.models import Order
from shop.tasks import send_receipt
with transaction.atomic():
    order = Order.objects.create(email="ada@example.com")
    send_receipt.enqueue(order.pk)
' || fail "enqueue in manage.py shell"

step "python manage.py runworker --burst"
manage runworker --burst 2>&1 | tee "$tmp/worker.log" | sed 's/^/    /' ||
  fail "manage.py runworker --burst"
step "the job succeeded with the result the function returned"
manage shell -v 0 -c '
from django_sqlqueue.models import Job
job = Job.objects.get()
assert (job.task_name, job.status) == ("shop.tasks.send_receipt", "succeeded"), (job.task_name, job.status)
assert job.result == {"sent_to": "ada@example.com"}, job.result
print(f"    job {job.pk}: {job.task_name} {job.status}, result {job.result}")
' || fail "the job did not succeed (the worker said, above)"

step "python manage.py stats"
manage stats >"$tmp/stats.txt" 2>&1 || { cat "$tmp/stats.txt" >&2; fail "manage.py stats"; }
sed 's/^/    /' "$tmp/stats.txt"
grep -q "default" "$tmp/stats.txt" || fail "manage.py stats does not show the default queue"
step "a new user's walk-through passed"
