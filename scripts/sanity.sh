#!/usr/bin/env bash
# Run `ansible-test sanity` on a copy of the collection laid out as
# ansible_collections/lmcache_vllm/fleet (ansible-test requires that path).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=$repo/.venv
work=$repo/.cache/sanity
dest=$work/ansible_collections/lmcache_vllm/fleet

# ansible-test --venv bootstraps pip with a script it normally downloads from a
# host this network does not reach; it looks for a saved copy first. This one
# uses the interpreter's own ensurepip and then installs the pip it was asked for.
getpip=$HOME/.ansible/test/cache/get_pip_24_2.py
if [ ! -f "$getpip" ]; then
  mkdir -p "$(dirname "$getpip")"
  cat > "$getpip" <<'PY'
import subprocess
import sys

subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"], stdout=subprocess.DEVNULL)
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install", *args])
PY
fi

rm -rf "$dest"
mkdir -p "$dest"
(cd "$repo" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$dest")
cd "$dest"
git init -q . && git add -A >/dev/null   # ansible-test lists files through git
"$venv/bin/ansible-test" sanity --venv --python 3.11 --color no "$@"
