#!/usr/bin/env bash
set -euo pipefail
# The Debian packages the tests need on this machine (run by `make test` and `make unit`, never by `make setup`,
# `make validate` or `make plan`, which install nothing).
# The unit tests of the KV store (role kv_store) run the real redis-server (Debian's) against the
# configuration and ACL file the collection renders, and the real prometheus-redis-exporter (Debian's, the
# store's Prometheus target) against that server; without them they are skipped (CI: they fail).
# `ansible-test sanity` checks the shell scripts with shellcheck (Debian's) and skips that test without it.
# The exporter package enables its own unit: a policy-rc.d keeps it from starting while apt runs.
kv_packages=""
command -v shellcheck >/dev/null 2>&1 || kv_packages="shellcheck"
command -v redis-server >/dev/null 2>&1 || kv_packages="$kv_packages redis-server"
[ -x /usr/bin/prometheus-redis-exporter ] || kv_packages="$kv_packages prometheus-redis-exporter"
if [ -n "$kv_packages" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "setup-test-packages: installing ${kv_packages# } (Debian) for the tests"
  policy=/usr/sbin/policy-rc.d
  policy_ours=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# setup-test-packages.sh: no service starts while it installs\nexit 101\n' > "$policy"
    chmod 0755 "$policy"
    policy_ours=1
    trap 'rm -f "$policy"' EXIT
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086 # a list of package names
  apt-get install -y -qq --no-install-recommends $kv_packages >/dev/null
  if [ "$policy_ours" = 1 ]; then rm -f "$policy"; fi
fi

echo "setup-test-packages: ok"
