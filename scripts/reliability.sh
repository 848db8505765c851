#!/usr/bin/env bash
# Re-run the reliability scenarios (tests/chaos) and rewrite the figures in docs/reliability.md.
#
#   scripts/reliability.sh                    # CI sizes, a few minutes
#   SQLQUEUE_SOAK=1 scripts/reliability.sh    # release soak: far more jobs, kills and restarts
#   SQLQUEUE_CHAOS_SEED=123 scripts/reliability.sh   # replay the random choices of a run
#
# Runs the suite on PostgreSQL (every scenario; a throwaway cluster unless DATABASE_URL is set)
# and on SQLite (the scenarios that apply to it), then renders both reports. The page is only
# rewritten when both runs pass. Needs .venv: run scripts/test.sh once to create it
# (SQLQUEUE_VENV=.venv-django6 uses its Django 6 environment instead, as CI's chaos pass does).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${SQLQUEUE_VENV:-.venv}
if [ ! -x "$venv/bin/pytest" ]; then
  echo "no $venv: run scripts/test.sh once first (it creates it and installs PostgreSQL)" >&2
  exit 1
fi
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
export SQLQUEUE_RELIABILITY_COMMAND="scripts/reliability.sh"
if [ -n "${SQLQUEUE_SOAK:-}" ] && [ "${SQLQUEUE_SOAK}" != 0 ]; then
  SQLQUEUE_RELIABILITY_COMMAND="SQLQUEUE_SOAK=1 $SQLQUEUE_RELIABILITY_COMMAND"
fi

for vendor in postgresql sqlite; do
  echo "==> Chaos scenarios on $vendor"
  SQLQUEUE_TEST_DATABASE=$vendor SQLQUEUE_RELIABILITY_REPORT="$reports/$vendor.json" \
    "$venv/bin/pytest" -q -p no:cacheprovider tests/chaos "$@"
done
"$venv/bin/python" scripts/render_reliability.py docs/reliability.md \
  "$reports/postgresql.json" "$reports/sqlite.json"
