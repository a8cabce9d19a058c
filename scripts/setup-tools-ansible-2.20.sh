#!/usr/bin/env bash
# Build a second, small tool venv with ansible-core 2.20 (requirements/tools-ansible-2.20.txt) for the unit
# stage "unit-ansible-2.20" of scripts/test.sh. ansible-core 2.20 needs Python >= 3.12: the first python3.12 or
# newer on PATH (or PYTHON312=<path>) is used. Idempotent: a second run only checks the stamp.
#   .cache/venv-ansible-2.20/
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=$repo/.cache/venv-ansible-2.20
reqs=$repo/requirements/tools-ansible-2.20.txt
stamp=$venv/.tools-stamp
want=$(sha256sum "$reqs" | cut -c1-16)

find_python() {
  local candidate
  for candidate in "${PYTHON312:-}" python3.14 python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
    [ -n "$candidate" ] || continue
    candidate=$(command -v "$candidate" 2>/dev/null) || continue
    if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if ! python=$(find_python); then
    echo "setup-tools-ansible-2.20: no Python 3.12 or newer found (ansible-core 2.20 needs it); install one" \
         "(e.g. python3.12) or set PYTHON312=<its path>" >&2
    exit 1
  fi
  echo "setup-tools-ansible-2.20: building $venv with $python"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q -r "$reqs"
  echo "$want" > "$stamp"
fi
echo "setup-tools-ansible-2.20: ok ($("$venv/bin/python" -c "import ansible.release as r; print('ansible-core', r.__version__)"))"
