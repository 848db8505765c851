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
