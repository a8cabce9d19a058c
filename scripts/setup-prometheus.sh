#!/usr/bin/env bash
# Install Debian's prometheus package (prometheus and promtool) for the tests: `promtool test rules` checks the
# recording rules of playbooks/files/prometheus/, and the molecule default scenario scrapes the sandbox with it.
# The package's own service is not started (a policy-rc.d refuses it while apt runs); the tests start their
# own prometheus with their own configuration. Idempotent: nothing happens when promtool is there.
set -euo pipefail
if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
  echo "setup-prometheus: ok ($(promtool --version 2>&1 | head -1))"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "setup-prometheus: promtool is missing; run as root to install Debian's prometheus package" >&2
  exit 1
fi
policy=/usr/sbin/policy-rc.d
ours=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# setup-prometheus.sh: no service starts while it installs\nexit 101\n' > "$policy"
  chmod 0755 "$policy"
  ours=1
fi
cleanup() { if [ "$ours" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
echo "setup-prometheus: ok ($(promtool --version 2>&1 | head -1))"
