# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The L2 case's commands, rendered by plan.yml for the 27B on the H200 (one host per chunk multiple, a pool each),
and its store, planned by kv_store_config and started with Debian's redis-server: what the GPU run starts. The
probe is a stand-in returning the H200's N (no GPU here); everything else is the collection's."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE]

import l2case  # noqa: E402
import l2store  # noqa: E402
import l2lib  # noqa: E402

N_H200 = 784  # the 27B's N on the H200 (docs/gpu.md)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    calls = []
    tmp_path = tmp_path_factory.mktemp("l2case")

    def probe_stand_in(work, args, timeout=1200):
        calls.append(args)
        return {"vllm_block_size": N_H200, "source": "cache"}, 0.1, ""

    patch = pytest.MonkeyPatch()
    patch.setattr(l2case.acc, "probe", probe_stand_in)
    args = l2case.parser().parse_args([
        "--model-dir", os.path.join(REPO, "tests", "fixtures", "models", "qwen3.6-27b"),
        "--host-vars", os.path.join(HERE, "h200-27b-host-vars.yml"), "--out", str(tmp_path / "r.json"),
        "--workdir", str(tmp_path / "work"), "--logs", str(tmp_path / "logs"), "--probe-cache", str(tmp_path / "c"),
        "--set", "vllm_server_venv=/opt/kit/venv", "--set", "lmcache_server_venv=/opt/kit/venv",
        "--set", "lmcache_server_kv_request_timeout=10", "--multiples", "1,4,2", "--store-port", str(_free_port())])
    os.makedirs(args.logs)
    case = l2case.Case(args, {"checks": {}, "timings_s": {}, "errors": [], "per_k": {}})
    try:
        per_k, vll, svars = l2case.prepare(case, args)
    finally:
        patch.undo()
    return case, per_k, vll, svars, calls


def test_each_k_gets_its_pool_chunk_and_adapter_and_vllm_stays_the_same(prepared):
    case, per_k, vll, svars, calls = prepared
    assert calls and calls[0]["force"] is False and case.res["N"] == N_H200
    assert case.res["checks"] == {"vllm_argv_same_for_every_k": True, "adapter_prefix_is_planned_prefix": True}
    for k in (1, 2, 4):
        lm = per_k[k]["lmcache"]
        assert lm["argv"][0] == "/opt/kit/venv/bin/python" and lm["argv"][1] == l2case.LAUNCHER
        assert lm["argv"][lm["argv"].index("--chunk-size") + 1] == str(k * N_H200)
        adapter = json.loads(lm["env"]["LMCACHE_FLEET_L2_ADAPTER"])
        assert adapter["type"] == "valkey" and adapter["startup_nodes"] == "127.0.0.1:%d" % case.args.store_port
        assert adapter["key_prefix"].startswith("l2k%d.qwen3.6-27b.n784.c%d." % (k, k * N_H200))
        assert adapter["request_timeout"] == 10.0
        # the credentials crossed as kv_pool says LMCache's client needs them
        assert {adapter["username"], adapter["password"]} == {"lmcache", case.password}
        assert per_k[k]["plan"]["kv_pool"]["sizing"]["value_bytes"] == k * N_H200 * 64 * 4096
    assert vll["argv"][vll["argv"].index("--max-num-batched-tokens") + 1] == str(2 * N_H200 - 1)
    assert case.base == "http://127.0.0.1:8000" and case.model_name == "acceptance"
    assert case.vocab == 248320 and case.layers == (16, 48)
    with open(os.path.join(case.args.workdir, "inventory", "hosts.json")) as fh:
        assert case.password not in fh.read()


@pytest.mark.skipif(not shutil.which("redis-server"), reason="Debian's redis-server is not installed")
def test_the_store_is_sized_for_the_largest_k_and_takes_only_the_pool_user(prepared):
    case, per_k, _vll, svars, _calls = prepared
    try:
        l2store.start_store(case, per_k, svars)
        store = case.res["store"]
        assert store["auth_ping"] == "PONG" and store["default_user_refused"] is True
        value_k4 = 4 * N_H200 * 64 * 4096
        assert store["summary"]["max_value_bytes"] == value_k4
        assert store["summary"]["proto_max_bulk_len"] > value_k4 > 512 * 2 ** 20
        client = l2store.store_client(case)
        assert client.call("SET", "l2k4.x@1", b"v" * 100) == "OK"
        with pytest.raises(l2lib.RespError):  # the pool's user has no administrative command
            client.call("CONFIG", "GET", "proto-max-bulk-len")
        client.close()
        with open(os.path.join(svars["kv_store_config_dir"], "fleet-kv-store.conf")) as fh:
            conf = fh.read().splitlines()
        assert "proto-max-bulk-len %d" % store["summary"]["proto_max_bulk_len"] in conf and "supervised no" in conf
        got = l2store.key_bytes(case, "l2k4.x", chunk_size=50)
        assert got["keys"] == 1 and got["value_bytes_max"] == 100 and got["bytes_per_token"] == 2.0
        assert l2store.delete_keys(case, "l2k4.x") == 1 and l2store.pool_keys(case, "l2k4.x") == []
    finally:
        l2case.shut_down(case, 0)
    assert case.res["checks"]["nothing_left_running"]
