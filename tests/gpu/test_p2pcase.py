# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""p2pcase.py's pieces without a GPU: the servers' argv and environment, vLLM's connector port, the summary."""

from __future__ import absolute_import, division, print_function

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import p2pcase  # noqa: E402

RENDERED = {"lmcache": {"argv": ["/v/bin/python", "/v/bin/fleet-lmcache-l2", "server", "--host", "127.0.0.1",
                                 "--port", "5555", "--http-port", "8080", "--chunk-size", "784"],
                        "env": {"LMCACHE_FLEET_L2_ADAPTER": '{"password": "secret"}', "HOME": "/h"},
                        "cwd": "/c", "home": "/h"}}


def args(*extra):
    return p2pcase.parser().parse_args(["--model-dir", "m", "--out", "o", "--host-vars", "h", "--workdir", "w",
                                        "--logs", "l"] + list(extra))


def test_server_b_runs_lmcache_itself_on_the_next_ports_as_a_p2p_peer_without_the_store():
    got = p2pcase.server(RENDERED, "b", 1, args("--ucx-tls", "tcp"))["lmcache"]
    argv = got["argv"]
    assert argv[:2] == ["/v/bin/lmcache", "server"]
    assert argv[argv.index("--port") + 1] == "5556" and argv[argv.index("--http-port") + 1] == "8081"
    assert argv[argv.index("--p2p-advertise-url") + 1] == "127.0.0.1:8556"
    assert argv[argv.index("--coordinator-url") + 1] == "http://127.0.0.1:9300"
    assert argv[argv.index("--instance-id") + 1] == "p2p-b"
    assert argv[argv.index("--chunk-size") + 1] == "784"
    assert "LMCACHE_FLEET_L2_ADAPTER" not in got["env"] and got["env"]["UCX_TLS"] == "tcp"


def test_server_a_keeps_the_rendered_ports_and_leaves_ucx_its_choice():
    got = p2pcase.server(RENDERED, "a", 0, args())["lmcache"]
    assert got["argv"][got["argv"].index("--port") + 1] == "5555"
    assert "UCX_TLS" not in got["env"]


def test_vllm_for_moves_only_the_connectors_lmcache_port():
    cfg = {"kv_connector": "LMCacheMPConnector",
           "kv_connector_extra_config": {"lmcache.mp.host": "tcp://127.0.0.1", "lmcache.mp.port": 5555}}
    vll = {"argv": ["vllm", "serve", "m", "--kv-transfer-config", json.dumps(cfg)], "env": {}}
    got = json.loads(p2pcase.vllm_for(vll, 5556)["argv"][4])
    assert got["kv_connector_extra_config"] == {"lmcache.mp.host": "tcp://127.0.0.1", "lmcache.mp.port": 5556}
    assert json.loads(vll["argv"][4]) == cfg


def test_summary_rates_the_load_by_the_part_of_the_ttft_it_adds():
    rows = {"8101": {"miss": {"ttft_s": 1.0}, "l1_hit": {"ttft_s": 0.2}, "l2_hit": {"ttft_s": 0.4, "hit_tokens": 7840},
                     "scores": {"l2_vs_miss": {"equal_token_share": 1.0}}}}
    row = p2pcase.summary(rows, 262144)[0]
    assert row["p2p_vs_miss"] == 0.4 and row["p2p_hit_tokens"] == 7840
    assert row["p2p_GBps_of_load"] == round(7840 * 262144 / 0.2 / 1e9, 2)
    assert row["same_answer_as_miss"] == 1.0
    assert p2pcase.summary({"8101": {"miss": {"ttft_s": 1.0}}}, 262144)[0]["p2p_GBps_of_load"] is None
