# Shell helpers shared by scripts/test.sh and benchmarks/run.sh (sourced, not run).

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
