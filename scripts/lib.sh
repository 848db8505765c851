# Shell helpers shared by scripts/test.sh, scripts/check_install.sh and benchmarks/run.sh (sourced,
# not run).

python_at_least() {  # python_at_least 3.12 -> path of such an interpreter
  local want=$1 candidate
  for candidate in python3.13 python3.12 python3 \
      "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python /usr/bin/python3.1[2-9]; do
    if "$candidate" -c "import sys; sys.exit(sys.version_info < tuple(map(int, '$want'.split('.'))))" \
        >/dev/null 2>&1; then
      command -v "$candidate" 2>/dev/null || echo "$candidate"
      return 0
    fi
  done
  return 1
}

apt_install() {  # apt_install WHAT PACKAGE...: as root on Debian/Ubuntu, else say what to install
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> $1 not found: installing ${*:2} with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${@:2}" >/dev/null
  else
    echo "$1 not found. Install it (sudo apt-get install ${*:2})." >&2
    return 1
  fi
}

have_postgres() {  # the server binaries tests/postgres_cluster.py runs (initdb, pg_ctl)
  command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

have_pgbouncer() {  # the pooler tests/pgbouncer.py runs in the pgbouncer pass
  command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]
}

have_mariadb() {  # the server tests/mariadb_server.py runs (mariadbd, mariadb-install-db)
  { command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; } &&
    command -v mariadb-install-db >/dev/null 2>&1
}

have_mariadb_headers() {  # what pip needs to build mysqlclient
  pkg-config --exists libmariadb 2>/dev/null || pkg-config --exists mysqlclient 2>/dev/null
}

# run_jobs LOGDIR SLOTS LABEL COMMAND [LABEL COMMAND]...: runs each COMMAND (a line of shell, in a
# subshell of the caller, so its functions work) with at most SLOTS at a time, in the order given.
# Each writes to its own LOGDIR/<label>.log, printed whole when it ends, so concurrent outputs
# never interleave; every two minutes a line says what is still running. At the end a table gives
# each one's result and minutes; returns 1 if any failed. Exit status 5 (pytest: no tests
# collected) reads "no tests" and fails only when RUN_JOBS_NO_TESTS_FAILS=1. The table also gives
# each one's CPU minutes (the command's, and every process's it waited for, as pytest waits for
# its workers; not a daemon's, such as a PostgreSQL server that pg_ctl started), to see where a
# CI run's CPU goes. Ctrl-C (or SIGTERM)
# sends SIGINT to every running command's process group, so pytest runs its teardown (stops its
# workers and its PostgreSQL cluster); SIGKILL follows 30 s later.
run_jobs() {
  local logs=$1 slots=$2
  shift 2
  local -a labels=() commands=() pids=() begun=() results=() minutes=() cpu=()
  while [ $# -ge 2 ]; do labels+=("$1"); commands+=("$2"); shift 2; done
  local total=${#labels[@]} next=0 running=0 i rc log failed=0 last_note=$SECONDS
  _run_jobs_started=()
  # Job control: each command gets a process group of its own (so it can be signalled whole, and
  # a terminal's Ctrl-C reaches only this script), and does not ignore SIGINT.
  set -m
  trap '_run_jobs_stop; exit 130' INT TERM
  while [ "$next" -lt "$total" ] || [ "$running" -gt 0 ]; do
    while [ "$next" -lt "$total" ] && [ "$running" -lt "$slots" ]; do
      log="$logs/$(_run_jobs_slug "${labels[next]}").log"
      # `times` (its second line: the subshell's children) gives its CPU, written beside the log.
      (set +e; eval "${commands[next]}"; rc=$?; times >"$log.cpu"; exit $rc) \
        </dev/null >"$log" 2>&1 &
      pids[next]=$!
      begun[next]=$SECONDS
      _run_jobs_started+=("$!")
      running=$((running + 1))
      echo "==> started: ${labels[next]} (log: $log)"
      next=$((next + 1))
    done
    sleep 1
    for ((i = 0; i < next; i++)); do
      if [ -n "${results[i]:-}" ] || kill -0 "${pids[i]}" 2>/dev/null; then
        continue
      fi
      rc=0
      wait "${pids[i]}" || rc=$?
      running=$((running - 1))
      minutes[i]=$(_run_jobs_minutes "${begun[i]}")
      log="$logs/$(_run_jobs_slug "${labels[i]}").log"
      cpu[i]=$(_run_jobs_cpu "$log.cpu")
      if [ "$rc" = 0 ]; then
        results[i]="passed"
      elif [ "$rc" = 5 ] && [ "${RUN_JOBS_NO_TESTS_FAILS:-}" != 1 ]; then
        results[i]="no tests"
      else
        results[i]="FAILED (exit $rc)"
        failed=$((failed + 1))
      fi
      echo
      echo "==> ${labels[i]}: ${results[i]} in ${minutes[i]} min; its output ($log):"
      cat "$log"
      echo "==> end of ${labels[i]}: ${results[i]}"
      echo
      last_note=$SECONDS
    done
    if [ $((SECONDS - last_note)) -ge 120 ] && [ "$running" -gt 0 ]; then
      local still=()
      for ((i = 0; i < next; i++)); do
        [ -n "${results[i]:-}" ] ||
          still+=("${labels[i]} ($(_run_jobs_minutes "${begun[i]}") min)")
      done
      echo "==> still running: $(IFS=,; echo "${still[*]}" | sed 's/,/, /g')"
      last_note=$SECONDS
    fi
  done
  trap - INT TERM
  set +m
  echo
  printf '%-36s %-16s %-8s %s\n' "run" "result" "minutes" "CPU minutes"
  for ((i = 0; i < total; i++)); do
    printf '%-36s %-16s %-8s %s\n' "${labels[i]}" "${results[i]}" "${minutes[i]}" "${cpu[i]}"
  done
  if [ "$failed" -gt 0 ]; then
    echo "==> $failed of $total FAILED: their output is above, after '==> <run>: FAILED'."
    return 1
  fi
}

_run_jobs_slug() { echo "$1" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9.' '-' | sed 's/-$//'; }

_run_jobs_cpu() {  # _run_jobs_cpu FILE: the minutes of `times`' last line, "0m1.5s 0m0.2s"
  [ -s "$1" ] || { echo "?"; return; }  # (user, system)
  awk 'END { t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] }
         printf "%.1f", t / 60 }' "$1"
}

_run_jobs_minutes() { awk -v s=$((SECONDS - $1)) 'BEGIN { printf "%.1f", s / 60 }'; }

_run_jobs_stop() {  # SIGINT to every process group run_jobs started that is still there, then
  local pid waited=0 alive  # SIGKILL after 30 s
  echo "==> interrupted: stopping the running commands" >&2
  for pid in "${_run_jobs_started[@]}"; do
    kill -INT -- "-$pid" 2>/dev/null || true
  done
  while [ $waited -lt 30 ]; do
    alive=0
    for pid in "${_run_jobs_started[@]}"; do
      if kill -0 -- "-$pid" 2>/dev/null; then alive=1; fi
    done
    [ $alive = 0 ] && return
    sleep 1
    waited=$((waited + 1))
  done
  for pid in "${_run_jobs_started[@]}"; do
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
}
