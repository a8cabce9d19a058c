# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pure parts of the L2 benchmark case: RESP, the pooled inventory, streamed answers, key bytes, Mamba states,
the summary; and the RESP client against Debian's redis-server with the store configuration the collection plans."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import l2lib  # noqa: E402
import scores  # noqa: E402


def test_resp_encode_is_an_array_of_bulk_strings():
    assert l2lib.resp_encode(["AUTH", "u", b"p\r\n"]) == b"*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$3\r\np\r\n\r\n"


def test_resp_read_every_reply_type():
    fh = io.BytesIO(b"+OK\r\n:42\r\n$5\r\nab\r\nc\r\n$-1\r\n*2\r\n$1\r\n0\r\n*1\r\n$3\r\nkey\r\n*-1\r\n")
    assert [l2lib.resp_read(fh) for dummy in range(6)] == ["OK", 42, b"ab\r\nc", None, [b"0", [b"key"]], None]


def test_resp_error_reply_raises_and_a_closed_connection_is_no_reply():
    with pytest.raises(l2lib.RespError, match="WRONGPASS"):
        l2lib.resp_read(io.BytesIO(b"-WRONGPASS invalid username-password pair\r\n"))
    with pytest.raises(ConnectionError):
        l2lib.resp_read(io.BytesIO(b""))


def test_inventory_puts_each_k_in_its_own_pool_with_a_store_on_the_same_host():
    inv = l2lib.inventory({"vllm_server_port": 8000}, [1, 4], {"kv_store_port": 6390})
    hosts = inv["all"]["children"]["vllm_hosts"]["hosts"]
    stores = inv["all"]["children"]["kv_stores"]["hosts"]
    assert sorted(hosts) == sorted(stores) == ["l2-k1", "l2-k4"]
    assert hosts["l2-k4"]["lmcache_server_chunk_multiple"] == 4
    assert hosts["l2-k4"]["lmcache_server_kv_pool"] == "l2k4" and stores["l2-k4"]["kv_store_pools"] == ["l2k4"]
    assert stores["l2-k1"]["kv_store_port"] == 6390 and stores["l2-k1"]["vllm_server_port"] == 8000


def test_runnable_config_drops_only_the_systemd_notification():
    config = ["port 1", "supervised systemd", "save \"\""]
    assert l2lib.runnable_config(config) == ["port 1", "supervised no", "save \"\""]


def test_prompt_ids_are_deterministic_exact_and_inside_the_vocabulary():
    a, b = l2lib.prompt_ids(5000, 7, 248320), l2lib.prompt_ids(5000, 7, 248320)
    assert a == b and len(a) == 5000 and a != l2lib.prompt_ids(5000, 8, 248320)
    assert min(a) >= 1000 and max(a) < 150000
    tiny = l2lib.prompt_ids(300, 1, 1024)
    assert min(tiny) >= 128 and max(tiny) < 1023


def test_sse_data_and_merge_chunks_give_what_scores_reads():
    lines = [b"data: " + json.dumps({"choices": [{"text": "", "logprobs": {
        "tokens": ["a"], "token_logprobs": [-0.5], "top_logprobs": [{"a": -0.5, "b": -1.0}]}}]}).encode() + b"\n",
        b"\n", b": keep-alive\n",
        b"data: " + json.dumps({"choices": [{"text": "x", "logprobs": {
            "tokens": ["b"], "token_logprobs": [-0.25], "top_logprobs": [{"b": -0.25}]}}]}).encode() + b"\n",
        b"data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 9}}).encode() + b"\n",
        b"data: [DONE]\n"]
    got = [l2lib.sse_data(line) for line in lines]
    assert got[1] is None and got[2] is None and got[-1] == "DONE"
    answer = l2lib.merge_chunks([c for c in got if isinstance(c, dict)])
    assert answer["usage"] == {"prompt_tokens": 9} and answer["choices"][0]["text"] == "x"
    assert scores.choice_scores(answer) == [("a", -0.5, {"a": -0.5, "b": -1.0}), ("b", -0.25, {"b": -0.25})]


def test_key_summary_counts_bytes_and_bytes_per_token():
    out = l2lib.key_summary([205520896, 205520896, 1000], [234881224, None, 1100], chunk_size=784)
    assert out["keys"] == 3 and out["value_bytes_max"] == 205520896 and out["value_bytes_min"] == 1000
    assert out["value_bytes_distinct"] == [1000, 205520896] and out["memory_usage_max"] == 234881224
    assert out["bytes_per_token"] == 262144.0
    assert l2lib.key_summary([], [])["value_bytes_max"] is None


def test_layer_counts_from_layer_types_or_the_interval():
    assert l2lib.layer_counts({"text_config": {"layer_types": ["linear_attention"] * 3 + ["full_attention"]}}) == (1, 3)
    assert l2lib.layer_counts({"num_hidden_layers": 64, "full_attention_interval": 4}) == (16, 48)
    assert l2lib.layer_counts({"num_hidden_layers": 2}) is None


def test_mamba_states_tells_one_state_from_k_states():
    layers, page = (16, 48), 784 * 4096
    key_1 = 64 * page
    k_states = l2lib.mamba_states(4 * key_1, key_1, 4, layers)
    one_state = l2lib.mamba_states((16 * 4 + 48) * page, key_1, 4, layers)
    assert k_states["states"] == 4.0 and k_states["answer"].startswith("k states")
    assert one_state["states"] == 1.0 and one_state["answer"] == "one state"
    assert l2lib.mamba_states(None, key_1, 2, layers) is None and l2lib.mamba_states(1, 1, 2, (2, 0)) is None


def test_summary_rows_ratios_throughput_and_break_even():
    per_k = {"1": {"chunk_size": 784, "keys": {"keys": 30, "value_bytes_max": 205520896, "bytes_per_token": 262144.0},
                   "mamba": {"states": 1.0},
                   "lengths": {"8101": {"miss": {"ttft_s": 1.0, "prompt_tokens": 8101},
                                        "l1_hit": {"ttft_s": 0.15, "hit_tokens": 7840},
                                        "l2_hit": {"ttft_s": 2.0, "hit_tokens": 7840,
                                                   "l2_load": {"sum": 9.0, "count": 10}, "error": None},
                                        "scores": {"l2_vs_miss": {"max_abs_diff": 0.01}}}}}}
    calls = []

    def break_even(per_token, prefill):
        calls.append((per_token, prefill))
        return per_token * prefill, None

    row = l2lib.summary_rows(per_k, 999, break_even)[0]
    assert calls == [(262144.0, 8101.0)]
    assert row["l2_vs_miss"] == 2.0 and row["l1_vs_miss"] == 0.15 and row["l2_load_GBps_metric"] == 0.9
    assert row["l2_GBps_end_to_end"] == round(7840 * 262144.0 / 2.0 / 1e9, 3)
    assert row["break_even_GBps"] == round(262144.0 * 8101 / 1e9, 3) and row["mamba_states_per_key"] == 1.0
    assert row["l2_scores_max_abs_diff_vs_miss"] == 0.01 and row["errors"] == []
    assert row["full_chunk_tokens"] == 7840
    missing = l2lib.summary_rows({"2": {"lengths": {"100": {"miss": {"error": "status 0"}}}}}, 5, break_even)[0]
    assert missing["prefill_tokens_per_s"] is None and missing["bytes_per_token"] == 5
    assert missing["full_chunk_tokens"] is None
    assert missing["errors"] == ["status 0"]


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.skipif(not shutil.which("redis-server"), reason="Debian's redis-server is not installed")
def test_resp_client_against_redis_server_with_the_planned_store(tmp_path):
    """Debian's redis-server with the configuration and ACL file kv_store_config plans: the pool's user reads
    STRLEN, MEMORY USAGE and SCAN, the default user is refused."""
    import gpulib  # noqa: F401  # exposes this checkout as the collection
    from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config
    port, password = _free_port(), "p" * 24
    settings = {"kv_store_password": password, "kv_store_port": port, "kv_store_home": str(tmp_path / "data"),
                "kv_store_config_dir": str(tmp_path / "conf"), "kv_store_maxmemory_mb": 64}
    plan = kv_store_config.plan_store("t", settings, {"redis-server": "x"})
    assert not plan["errors"]
    for sub in ("data", "conf"):
        (tmp_path / sub).mkdir()
    (tmp_path / "conf" / "fleet-kv-store.conf").write_text("\n".join(l2lib.runnable_config(plan["config_lines"])))
    (tmp_path / "conf" / "users.acl").write_text("\n".join(plan["acl_lines"]) + "\n")
    proc = subprocess.Popen(["redis-server", plan["config_path"]], stdout=subprocess.DEVNULL)
    try:
        client = None
        for dummy in range(100):
            try:
                client = l2lib.Resp("127.0.0.1", port, "lmcache", password)
                break
            except (OSError, l2lib.RespError):
                time.sleep(0.1)
        assert client is not None
        assert client.call("SET", "pool@a", b"x" * 1000) == "OK"
        assert client.call("SET", "pool@b", b"y" * 10) == "OK"
        assert sorted(client.scan("pool@*", count=1)) == [b"pool@a", b"pool@b"]
        assert client.call("STRLEN", "pool@a") == 1000
        assert client.call("MEMORY", "USAGE", "pool@a", "SAMPLES", "0") >= 1000
        assert client.call("UNLINK", "pool@a", "pool@b") == 2
        client.close()
        anonymous = l2lib.Resp("127.0.0.1", port)
        with pytest.raises(l2lib.RespError):
            anonymous.call("GET", "pool@a")
        anonymous.close()
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_store_holds_every_prompt_of_one_k_at_the_smallest_k():
    assert l2lib.prompts_written([8101, 15941]) == [15941, 8101, 15941, 8101, 8101]
    # The 0.8B (N 544) at k=1 alone: 30 + 15 + 30 + 15 + 15 chunks with half again, each a value of the largest k (1).
    assert l2lib.store_keys([8101, 15941], 544, [1]) == 158
    # With k=4 too, a value of 4 holds four of 1: 105 x 1.5 / 4.
    assert l2lib.store_keys([8101, 15941], 544, [1, 4]) == 40
    # The 27B (N 784) at k=1 and 4: 75 chunks of k=1, 29 values of k=4.
    assert l2lib.store_keys([8101, 15941], 784, [1, 4]) == 29
    # A short run keeps the floor.
    assert l2lib.store_keys([1000], 784, [1]) == 24


def test_evicted_keys_come_from_info_stats():
    info = b"# Stats\r\ntotal_connections_received:4\r\nevicted_keys:53\r\nevicted_clients:0\r\n"
    assert l2lib.evicted_keys(info) == 53
    assert l2lib.evicted_keys("# Stats\r\nevicted_keys:0\r\n") == 0
    assert l2lib.evicted_keys(b"# Stats\r\n") is None
