# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests of block_size_probe with ``readback``: N read back from the started service (its real HTTP
``/metrics``, served here by a local HTTP server, else the journal of the unit's current start) and compared with
the probed N and the unit's flags. Runs the whole module through the multi-GPU vLLM TEST DOUBLE of
test_block_size_probe_cuda.py and TEST DOUBLES of ``systemctl`` and ``journalctl`` (this machine runs no vLLM unit;
the molecule scenario reads N back from real units on systemd hosts)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import threading

from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

# the fixture multi_gpu_vllm_double is used by name
from test_block_size_probe_cuda import multi_gpu_vllm_double, probe_tp2, read_log  # noqa: F401 pylint: disable=unused-import

INFO = 'vllm:cache_config_info{block_size="%s",engine="0",mamba_cache_mode="align",num_gpu_blocks="626"} 1.0\n'


@pytest.fixture
def metrics():
    """A local HTTP server whose /metrics answers ``metrics.text`` (404 while it is None)."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the http.server name)
            body = server.text
            self.send_response(200 if body is not None and self.path == "/metrics" else 404)
            self.end_headers()
            self.wfile.write((body or "").encode())

        def log_message(self, *args):
            pass
    server = HTTPServer(("127.0.0.1", 0), Handler)
    server.text = None
    server.url = "http://127.0.0.1:%d/metrics" % server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def unit(tmp_path, monkeypatch):
    """TEST DOUBLES of ``systemctl`` (prints the invocation id ``unit.invocation``) and ``journalctl`` (prints
    ``journal.txt`` and records its argv), first on PATH."""
    bindir = tmp_path / "unit-bin"
    bindir.mkdir()
    text, argv, invocation = tmp_path / "journal.txt", tmp_path / "journalctl.argv", tmp_path / "invocation"
    invocation.write_text("")
    text.write_text("")
    for name, body in (("systemctl", 'cat %s\n' % invocation), ("journalctl", 'echo "$@" > %s\ncat %s\n' % (argv, text))):
        script = bindir / name
        script.write_text("#!/bin/sh\n" + body)
        script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))

    class Unit(object):
        def started(self, invocation_id, *lines):
            invocation.write_text(invocation_id + "\n")
            text.write_text("\n".join(lines) + "\n")

        def journal_argv(self):
            return argv.read_text().split() if argv.exists() else None
    return Unit()


def _readback(d, url, **kw):
    spec = dict(metrics_url=url, block_size=1056, probed_block_size=1056, chunk_size=1056,
                max_num_batched_tokens=2111, host="gpu-a")
    spec.update(kw)
    return d.run(tensor_parallel_size=2, service_name="vllm", readback=spec)


def test_the_metric_gives_n_and_agrees(multi_gpu_vllm_double, metrics, unit):
    d = multi_gpu_vllm_double
    metrics.text = "# HELP x\n" + INFO % 1056
    status, res = _readback(d, metrics.url)
    assert status == "ok" and res["outcome"] == "agrees" and not res["changed"], res
    live = res["readback"]
    assert (live["n"], live["source"], live["num_gpu_blocks"], live["problems"]) == (1056, "metric", 626, [])
    assert "ansible_facts" not in res and d.launched() is None and unit.journal_argv() is None
    assert not os.path.exists(d.cache)


def test_a_running_n_unlike_the_probe_and_the_flags_is_a_problem_naming_the_host(multi_gpu_vllm_double, metrics,
                                                                                 unit):
    d = multi_gpu_vllm_double
    metrics.text = INFO % 544
    status, res = _readback(d, metrics.url)
    assert status == "ok" and res["outcome"] == "drifted", res
    problems = res["readback"]["problems"]
    assert len(problems) == 3 and all(p.startswith("host gpu-a: ") for p in problems), problems
    assert "the probe found N=1056" in problems[0] and "rendered for N=1056" in problems[1]
    assert "chunk size 1056 is not a multiple of the running N=544" in problems[2]
    assert res["reason"] == " | ".join(problems)


def test_a_hybrid_metric_of_16_reads_the_journal_of_the_current_start(multi_gpu_vllm_double, metrics, unit):
    d = multi_gpu_vllm_double
    metrics.text = INFO % 16
    unit.started("0123abcd", *read_log("vllm-0.20.0-tp1-enginecore.log"))  # a real start: N 1568
    status, res = _readback(d, metrics.url, block_size=1568, probed_block_size=1568, chunk_size=1568,
                            max_num_batched_tokens=3135)
    assert status == "ok" and res["outcome"] == "agrees" and res["readback"]["n"] == 1568 and res["readback"]["source"] == "journal", res
    assert "reports block_size=16 for a hybrid model" in res["readback"]["detail"]
    assert unit.journal_argv()[:2] == ["-u", "vllm"]
    assert "_SYSTEMD_INVOCATION_ID=0123abcd" in unit.journal_argv()
    # the same 16 from a model that is not hybrid is N
    status, res = _readback(d, metrics.url, hybrid=False, block_size=16, probed_block_size=16, chunk_size=256,
                            max_num_batched_tokens=2048)
    assert res["readback"]["n"] == 16 and res["readback"]["source"] == "metric" and res["outcome"] == "agrees", res


def test_no_metrics_and_no_start_is_unread_not_a_failure(multi_gpu_vllm_double, metrics, unit):
    d = multi_gpu_vllm_double
    status, res = _readback(d, metrics.url)
    assert status == "ok" and res["outcome"] == "unread" and res["readback"]["n"] is None, res
    assert res["readback"]["problems"] == [] and "404" in res["readback"]["metrics_problem"]
    assert unit.journal_argv() is None  # no invocation id: no journal read


def test_with_expected_the_confirmation_comes_with_the_readback(multi_gpu_vllm_double, metrics, unit):
    d = multi_gpu_vllm_double
    probe_tp2(d)
    metrics.text = INFO % 1056
    status, res = d.run(tensor_parallel_size=2, service_name="vllm",
                        readback=dict(metrics_url=metrics.url, block_size=1056, host="gpu-b"),
                        expected=dict(block_size=1056, host="gpu-b", group="g1", canary="gpu-a"))
    assert status == "ok" and res["confirmation"]["outcome"] == "confirmed", res
    assert res["readback"]["n"] == 1056 and res["readback"]["problems"] == []
    assert "ansible_facts" not in res and d.launched() is None


def test_readback_needs_the_service(multi_gpu_vllm_double, metrics):
    status, res = multi_gpu_vllm_double.run(readback=dict(metrics_url=metrics.url))
    assert status == "failed" and "readback is set but service_name is not" in res["msg"], res
