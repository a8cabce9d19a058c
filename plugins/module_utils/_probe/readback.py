# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``block_size_probe`` with ``readback``: N as the started service reports it, and where it differs.

Once the unit has started: N from the service's own ``/metrics`` (``vllm:cache_config_info``), else (the metric
missing, or 16 for a hybrid model on a vLLM before the fix) from the journal of the unit's current start
(``systemctl show -p InvocationID``, then that start's lines only), compared with the probed N and the unit's
flags (``block_size_readback``: the rules, shared with the public filters). Launches nothing, writes no cache,
sets no facts."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    from urllib.error import URLError
    from urllib.request import ProxyHandler, build_opener
except ImportError:  # pragma: no cover - Python 2 targets are not supported
    URLError = OSError
    ProxyHandler = build_opener = None

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.block_size.block_size_readback import drift, read_back

METRICS_TIMEOUT = 10


def fetch_metrics(url, timeout=METRICS_TIMEOUT):
    """(text, problem) of the service's ``/metrics``; the host reads its own service, so no proxy applies."""
    try:
        response = build_opener(ProxyHandler({})).open(url, timeout=timeout)
        try:
            return response.read().decode("utf-8", "replace"), None
        finally:
            response.close()
    except (URLError, OSError, ValueError) as e:
        return "", "cannot read %s: %s" % (url, e)


def current_start_journal(host, service_name):
    """The journal lines of the unit's current start (message text only), or '' when there are none."""
    try:
        rc, out, _err = host.run(["systemctl", "show", "-p", "InvocationID", "--value", service_name])
        invocation = out.strip() if rc == 0 else ""
        if not invocation:
            return ""
        rc, out, _err = host.run(["journalctl", "-u", service_name, "--no-pager", "-q", "-o", "cat",
                                  "_SYSTEMD_INVOCATION_ID=%s" % invocation])
    except OSError:
        return ""
    return out if rc == 0 else ""


def read(req, fetch=fetch_metrics):
    """``readback``'s result: :func:`read_back`'s (``n``, ``source``, ``detail``, ``num_gpu_blocks``...) with
    ``problems`` (``drift``'s sentences, [] when N agrees or could not be read) and ``metrics_problem``."""
    spec = req.p["readback"]
    text, problem = fetch(spec["metrics_url"])
    live = read_back(text, hybrid=spec["hybrid"], platform=req.platform)
    if live["n"] is None:
        live = read_back(text, current_start_journal(req.host, req.p["service_name"]), hybrid=spec["hybrid"],
                         platform=req.platform)
    problems = drift(spec["host"] or "", live, probed_n=spec["probed_block_size"], unit_n=spec["block_size"],
                     chunk_size=spec["chunk_size"], max_num_batched_tokens=spec["max_num_batched_tokens"])
    return dict(live, problems=problems, metrics_problem=problem)


def answer(req, live):
    """The module's answer with ``readback`` alone (no ``expected``): the base and the read-back, no facts."""
    if live["problems"]:
        outcome, reason = "drifted", " | ".join(live["problems"])
    elif live["n"] is None:
        outcome, reason = "unread", "N could not be read back from %s: %s" % (req.p["service_name"], live["detail"])
    else:
        outcome = "agrees"
        reason = "N=%s from the running service (%s; %s)" % (live["n"], live["source"], live["detail"])
    return dict(req.base, readback=live, outcome=outcome, reason=reason, changed=False)
