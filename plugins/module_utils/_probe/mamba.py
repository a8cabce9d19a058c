# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``block_size_probe`` and the Mamba cache blocks M that vLLM reports when it refuses ``--max-num-seqs``.

M lives in the probe's cache (the section ``cache.MAMBA_SECTION``) under the service fingerprint plus the inputs
that change M (the option ``mamba_inputs``: ``mamba_clamp.cache_key_of``). With ``mamba_refusal``, the journal of the
service's last starts is searched for vLLM's refusal ``max_num_seqs (X) exceeds available Mamba cache blocks (M)``:
found, M is cached and returned (source ``refusal``); not found, ``mamba_refusal`` is null and nothing changes. Any
other answer with an N carries the M cached for its inputs (source ``cached``), if there is one."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli.mamba_clamp import (
    cache_key_of,
    cached_blocks,
    parse_refusal,
)

# the journal lines searched for the refusal (systemd restarts a refused unit: the last start's lines are last)
REFUSAL_JOURNAL_LINES = 400


def journal_argv(service_name):
    """``journalctl`` for the last :data:`REFUSAL_JOURNAL_LINES` lines of the unit, message text only."""
    return ["journalctl", "-u", service_name, "-n", str(REFUSAL_JOURNAL_LINES), "--no-pager", "-q", "-o", "cat"]


def _key(req):
    return cache_key_of(req.base["service_fingerprint"], req.p["mamba_inputs"])


def cached(req):
    """``{'mamba_cache_blocks', 'source': 'cached'}`` for the request's inputs of M, or None (no ``mamba_inputs``,
    no fingerprint or no record)."""
    if req.p["mamba_inputs"] is None or not req.base.get("service_fingerprint"):
        return None
    blocks = cached_blocks(req.cache.mamba, _key(req))
    return None if blocks is None else {"mamba_cache_blocks": blocks, "source": "cached"}


def from_refusal(req, now):
    """The answer of ``mamba_refusal`` (the cache loaded, under its lock): M recorded when the journal holds the
    refusal. ``now()``: the time stamp of the record."""
    name = req.p["service_name"]
    try:
        rc, out, _err = req.host.run(journal_argv(name))
    except OSError as e:
        rc, out = 1, "cannot run journalctl: %s" % e
    refusal = parse_refusal(out if rc == 0 else "")
    res = dict(req.base, mamba_refusal=refusal, changed=False)
    if refusal is None:
        return dict(res, outcome="not_refused", reason="no refusal for the Mamba cache blocks in the journal of %s"
                    % name)
    blocks = refusal["mamba_cache_blocks"]
    record = {"mamba_cache_blocks": blocks, "refused_max_num_seqs": refusal["max_num_seqs"], "reported_at": now()}
    changed = False if req.check_mode else req.cache.store_mamba(_key(req), record)
    return dict(res, outcome="refused", changed=changed, mamba_blocks={"mamba_cache_blocks": blocks,
                                                                       "source": "refusal"},
                reason="vLLM refused max_num_seqs %d: %d Mamba cache blocks (M) for these inputs, cached in %s"
                % (refusal["max_num_seqs"], blocks, req.p["cache_path"]))
