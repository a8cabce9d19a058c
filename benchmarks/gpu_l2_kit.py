# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kit of benchmarks/gpu_l2_warmstart.py, made on the control node: the units of both models as
``playbooks/plan.yml`` renders them, the pool's ``--l2-adapter`` JSON and the store's configuration and ACL
file (``kv_pool``, ``kv_store_config``). See gpu_l2_warmstart.py for the commands."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(REPO, "tests", "gpu"), os.path.join(REPO, "tests")]

MODELS = {
    "qwen3.5-0.8b": {"host_vars": "tests/gpu/h200-host-vars.yml", "n": 544},
    "qwen3.6-27b": {"host_vars": "tests/gpu/h200-27b-host-vars.yml", "n": 784},
}
# The plan's Mamba clamp for the 27B at 0.6 (docs/gpu.md): given when the rendered unit has no --max-num-seqs,
# since vLLM's default (1024) exceeds the 604 Mamba cache blocks there and vLLM refuses to start.
MAX_NUM_SEQS_27B = 556
MODEL_ROOT = "/opt/fleet-models"
POOL = "default"
STORE_USER = "lmcache"
STORE_PORT = 6379


def now():
    return time.strftime("%H:%M:%S", time.gmtime())


def log(*args):
    print("[%s]" % now(), *args, flush=True)


# ---------------------------------------------------------------- render (control node)

def _pool_values(checkout, n_inputs, derived, cfg, password, store_dir):
    """Adapter JSON, key prefix and the store's files from the kv pool code of ``checkout`` (its own Python)."""
    code = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool, kv_store_config as ks
a = json.loads(sys.stdin.read())
inputs = kv_pool.prefix_inputs(a['n_inputs'], a['derived'], a['cfg'])
prefix = kv_pool.key_prefix(a['pool'], inputs)
resolved = {'pool': a['pool'], 'stores': ['store'], 'nodes': ['127.0.0.1:%d' % a['port']], 'cluster': False,
            'username': a['user'], 'password': a['password']}
v = {'bind': '127.0.0.1', 'port': a['port'], 'maxmemory_mb': 8192, 'policy': 'allkeys-lru', 'cluster': False,
     'home': a['store_dir'], 'config_dir': a['store_dir']}
print(json.dumps({'inputs': inputs, 'key_prefix': prefix, 'adapter': kv_pool.adapter(resolved, prefix),
                  'adapter_shown': kv_pool.adapter_shown(resolved, prefix),
                  'credentials_crossed': kv_pool.CREDENTIALS_CROSSED,
                  'config_lines': ks.config_lines(v, {'name': 'redis'}),
                  'acl_lines': ks.acl_lines(a['user'], a['password'])}))
"""
    tree = os.path.join(os.path.abspath(checkout), ".cache", "collections")
    payload = json.dumps({"n_inputs": n_inputs, "derived": derived, "cfg": cfg, "pool": POOL, "port": STORE_PORT,
                          "user": STORE_USER, "password": password, "store_dir": store_dir})
    out = subprocess.run([sys.executable, "-c", code, tree], input=payload, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def render(args):
    import acceptance as acc
    import yaml
    kit = os.path.abspath(args.kit)
    os.makedirs(kit, exist_ok=True)
    password = secrets.token_urlsafe(24)
    import hashlib
    out = {"models": {}, "store": None, "rendered": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "kv_code_sha256": {}}
    for name in ("kv_pool.py", "kv_store_config.py"):
        with open(os.path.join(args.checkout, "plugins", "module_utils", "kv", name), "rb") as fh:
            out["kv_code_sha256"][name] = hashlib.sha256(fh.read()).hexdigest()
    for name, spec in MODELS.items():
        with open(os.path.join(REPO, spec["host_vars"])) as fh:
            hv = yaml.safe_load(fh)
        hv["vllm_server_venv"] = hv["lmcache_server_venv"] = args.venv
        local = os.path.join(REPO, "tests", "fixtures", "models", name)
        hv["vllm_server_model"] = "%s/%s" % (MODEL_ROOT, name)
        hv["vllm_server_model_config"] = os.path.join(local, "config.json")
        root = acc.render(os.path.join(args.work, name), local, hv, spec["n"])
        lmc, vll = acc.unit_command(root, "lmcache-server"), acc.unit_command(root, "vllm")
        given = None
        if name == "qwen3.6-27b" and "--max-num-seqs" not in vll["argv"]:
            given = hv["vllm_server_max_num_seqs"] = MAX_NUM_SEQS_27B
            root = acc.render(os.path.join(args.work, name + "-seqs"), local, hv, spec["n"])
            lmc, vll = acc.unit_command(root, "lmcache-server"), acc.unit_command(root, "vllm")
        with open(os.path.join(root, "plan.json")) as fh:
            planned = json.load(fh)
        with open(os.path.join(root, "etc", "systemd", "system", "vllm.service")) as fh:
            private_tmp = "PrivateTmp=true" in fh.read()
        entry = {"N": spec["n"], "host_vars": spec["host_vars"], "model_path": hv["vllm_server_model"],
                 "private_tmp": private_tmp, "max_num_seqs_given": given,
                 "lmcache": {k: lmc[k] for k in ("argv", "env", "working_directory")},
                 "vllm": {k: vll[k] for k in ("argv", "env", "working_directory")}}
        if name == "qwen3.5-0.8b":
            cfg = dict(hv)
            kv = _pool_values(args.checkout, planned["n_inputs"], planned["derived"], cfg, password, "/var/lib/fleet-kv")
            entry["l2"] = {k: kv[k] for k in ("inputs", "key_prefix", "adapter", "adapter_shown", "credentials_crossed")}
            out["store"] = {"user": STORE_USER, "password": password, "port": STORE_PORT, "dir": "/var/lib/fleet-kv",
                            "config_lines": kv["config_lines"], "acl_lines": kv["acl_lines"]}
        out["models"][name] = entry
    with open(os.path.join(kit, "kit.json"), "w") as fh:
        json.dump(out, fh, indent=1)
    print(json.dumps({m: {"argv": e["vllm"]["argv"][:3], "l2": (e.get("l2") or {}).get("adapter_shown")}
                      for m, e in out["models"].items()}, indent=1))
    return 0
