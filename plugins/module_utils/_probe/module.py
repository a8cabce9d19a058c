# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``run_module`` of ``block_size_probe``: the request, the sources in order, the first answer, one finish (with
``expected``: the answer compared with the expected N; with ``mamba_refusal``: the refusal's M recorded instead;
with ``readback``: N as the started service reports it). Any ProbeFailed ends in the one failure path."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared.redact import redact, redact_text
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.confirm import confirmation
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.errors import ProbeFailed
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe import mamba, readback
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.request import build_request
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.sources import cache_held, first_answer, utcnow


def run_module(module):
    """Answer with N (or why not) and exit the module."""
    started = time.time()
    warn = module.warn
    module.warn = lambda msg: warn(redact_text(msg))
    base = {"changed": False, "cache_file": module.params["cache_path"]}
    try:
        req = build_request(module, base)
        if module.params["mamba_refusal"] and not req.early:
            with cache_held(req):
                finish(module, mamba.from_refusal(req, utcnow), started)
        if module.params["readback"] and not module.params["expected"] and not req.early:
            finish(module, readback.answer(req, readback.read(req)), started)
        answer = req.early or first_answer(req)
    except ProbeFailed as e:
        fail(module, base, e, started)
    if module.params["expected"]:
        confirm(module, req, answer, started)
    blocks = mamba.cached(req) if answer and "vllm_block_size" in answer else None
    finish(module, dict(answer, mamba_blocks=blocks) if blocks else answer, started)


def confirm(module, req, answer, started):
    """The exit with ``expected``: the answer and its ``confirmation``, without facts (the group's N stays)."""
    res = dict(answer or req.base)
    res["confirmation"] = confirmation(module.params["expected"], answer, req.journal_note)
    if module.params["readback"] and not req.early:
        res["readback"] = readback.read(req)
    res.pop("skipped", None)
    res.setdefault("outcome", "unconfirmed")
    res.setdefault("reason", res["confirmation"]["message"])
    module.exit_json(**redact(dict(res, elapsed_s=round(time.time() - started, 3))))


def finish(module, answer, started):
    """The one exit with an answer: N with its facts (and M, ``vllm_mamba_blocks``, when one is cached or was just
    reported), or a run that read or launched nothing."""
    res = redact(dict(answer, elapsed_s=round(time.time() - started, 3)))
    facts = {"vllm_mamba_blocks": res["mamba_blocks"]} if res.get("mamba_blocks") else {}
    if "vllm_block_size" in res:
        facts.update(vllm_block_size=res["vllm_block_size"], vllm_block_size_probe=dict(res))
    if facts:
        module.exit_json(ansible_facts=facts, **res)
    if res.get("skipped"):
        module.exit_json(msg=res["reason"], **res)
    module.exit_json(**res)


def fail(module, base, error, started):
    """The one failure path: the result so far, the error's values, ``outcome`` (default ``error``)."""
    res = dict(base)
    res.update(error.result)
    res.setdefault("outcome", "error")
    res.setdefault("reason", error.msg)
    res["elapsed_s"] = round(time.time() - started, 3)
    module.fail_json(msg=redact_text(error.msg), **redact(res))
