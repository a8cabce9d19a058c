# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The store of the L2 benchmark case (``l2case.py``): Debian's redis-server started with the configuration and ACL
file of ``kv_store_config.plan_store`` (sized from the pools' planned values, ``kv_pool.pool_values``), and the
pool's keys read, counted, measured and deleted through the RESP client of ``l2lib.py``. ``case`` is l2case's
``Case`` (its arguments, password, logs and result)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import acceptance as acc  # noqa: E402
import gpulib as g  # noqa: E402  (its import exposes this checkout as the collection)
import l2lib  # noqa: E402
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool  # noqa: E402
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config  # noqa: E402

STORE_USER = "lmcache"


def start_store(case, per_k, svars):
    """kv_store_config.plan_store sized from the pools' planned values; redis-server started with its files."""
    settings = dict(svars, kv_store_pools=[l2lib.pool_name(k) for k in per_k])
    plans = [dict(e["plan"], host=l2lib.host_name(k)) for k, e in per_k.items()]
    plan = kv_store_config.plan_store("l2-store", settings, {"redis-server": "bench"},
                                      pool_values=kv_pool.pool_values(plans))
    if plan["errors"]:
        raise RuntimeError("the store's plan: %s" % plan["errors"])
    for path in (svars["kv_store_home"], svars["kv_store_config_dir"]):
        os.makedirs(path, exist_ok=True)
    with open(plan["config_path"], "w") as fh:
        fh.write("\n".join(l2lib.runnable_config(plan["config_lines"])) + "\n")
    with open(plan["acl_path"], "w") as fh:
        fh.write("\n".join(plan["acl_lines"]) + "\n")
    os.chmod(plan["acl_path"], 0o600)
    binary = case.args.redis_server
    env = {"PATH": acc.SYSTEMD_PATH}
    lib = os.path.join(os.path.dirname(os.path.abspath(binary)), "lib")
    if os.path.isdir(lib):
        env["LD_LIBRARY_PATH"] = lib
    version = subprocess.run([binary, "--version"], env=env, capture_output=True, text=True, timeout=30, check=False)
    case.store = g.start([binary, plan["config_path"]], env, os.path.join(case.logs, "kv-store.log"),
                         cwd=svars["kv_store_home"])
    out = {"version": version.stdout.strip() or version.stderr.strip()[-300:], "summary": plan["summary"],
           "config_lines": plan["config_lines"]}
    deadline = time.monotonic() + 30
    while True:
        try:
            client = store_client(case)
            out["auth_ping"] = client.call("PING")
            client.close()
            break
        except (OSError, l2lib.RespError) as exc:
            if time.monotonic() > deadline or case.store.poll() is not None:
                raise RuntimeError("the store did not answer: %s" % exc) from exc
            time.sleep(0.3)
    out["default_user_refused"] = default_user_refused(case)
    case.res["store"] = out
    case.res["checks"]["store_default_user_refused"] = out["default_user_refused"]


def store_client(case, timeout=30.0):
    return l2lib.Resp("127.0.0.1", case.args.store_port, STORE_USER, case.password, timeout=timeout)


def default_user_refused(case):
    client = l2lib.Resp("127.0.0.1", case.args.store_port, timeout=10)
    try:
        client.call("GET", "x")
        return False
    except l2lib.RespError:
        return True
    finally:
        client.close()


def pool_keys(case, prefix):
    client = store_client(case)
    try:
        return client.scan(prefix + "@*")
    finally:
        client.close()


def key_bytes(case, prefix, chunk_size=None):
    """Count, STRLEN and MEMORY USAGE of the pool's keys."""
    client = store_client(case, timeout=60)
    try:
        keys = client.scan(prefix + "@*")
        strlens = [client.call("STRLEN", key) for key in keys]
        usages = [client.call("MEMORY", "USAGE", key, "SAMPLES", "0") for key in keys]
    finally:
        client.close()
    out = l2lib.key_summary(strlens, usages, chunk_size)
    out["example_key"] = keys[0].decode("utf-8", "replace") if keys else None
    return out


def evicted_keys(case):
    """The keys the store evicted since it started (INFO stats): a store too small for the prompts' chunks."""
    client = store_client(case)
    try:
        return l2lib.evicted_keys(client.call("INFO", "stats"))
    finally:
        client.close()


def delete_keys(case, prefix):
    client = store_client(case, timeout=120)
    try:
        keys = client.scan(prefix + "@*")
        for i in range(0, len(keys), 100):
            client.call("UNLINK", *keys[i:i + 100])
        return len(keys)
    finally:
        client.close()


def wait_keys(case, prefix, settle=3.0, timeout=90.0):
    """Wait until the pool's key count stops growing (LMCache writes to the store after the answer)."""
    t0 = time.monotonic()
    last, since = len(pool_keys(case, prefix)), time.monotonic()
    while time.monotonic() - t0 < timeout:
        time.sleep(0.5)
        cur = len(pool_keys(case, prefix))
        if cur != last:
            last, since = cur, time.monotonic()
        elif time.monotonic() - since >= settle:
            break
    return {"keys": last, "waited_s": round(time.monotonic() - t0, 2)}
