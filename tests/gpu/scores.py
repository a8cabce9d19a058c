# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Score-level comparison of two greedy continuations of the same prompt (standard library only).

Generation is not bit-exact between a run served from a cache and a fresh one: the tokens after the
cached prefix are computed in other batch shapes, so bf16 rounding differs. The comparison therefore
looks at scores, not only at the text. For every generated position up to and including the first
position where the two greedy tokens differ (after it the contexts differ and nothing is comparable),
it takes the logprob of the chosen token and the top-k logprobs of every token both runs list, and
reports the maximum and mean absolute difference and the share of positions whose greedy token is equal.

The bound a served-from-cache run must stay within is derived from noise measured in the same run:
``bound = max(k * noise, floor)``, where noise is the largest difference between two computations that
are right by construction (two fresh runs; a fresh run and vLLM's own prefix-cache hit, which reuses
the same KV bytes with the cached run's batch shapes). ``floor`` keeps a bound above zero where that
noise is exactly zero. A control makes the check meaningful: a fresh run of a prompt whose first block
differs (what a cache hit on the wrong prefix would give) must differ by more than the bound, else the
comparison cannot tell a wrong KV from a right one (which happens with near-flat dummy-weight logits).
"""

from __future__ import annotations


def choice_scores(data):
    """[(token, logprob of the token, {token: logprob} of the top-k)] of the first choice of a
    /v1/completions answer ([] when it carries no logprobs)."""
    choice = (data.get("choices") or [{}])[0] if isinstance(data, dict) else {}
    lp = choice.get("logprobs") or {}
    tokens = lp.get("tokens") or []
    token_lp = lp.get("token_logprobs") or []
    tops = lp.get("top_logprobs") or []
    out = []
    for i, tok in enumerate(tokens):
        top = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
        value = token_lp[i] if i < len(token_lp) else None
        out.append((tok, value, {k: v for k, v in top.items() if v is not None}))
    return out


def compare(ref, other):
    """Differences of ``other`` against ``ref`` (both from :func:`choice_scores`)."""
    diffs = []
    positions = 0
    first_divergence = None
    for i, ((tok_a, lp_a, top_a), (tok_b, lp_b, top_b)) in enumerate(zip(ref, other)):
        positions += 1
        if tok_a == tok_b:
            if lp_a is not None and lp_b is not None:
                diffs.append(abs(lp_a - lp_b))
        for tok in set(top_a) & set(top_b):
            diffs.append(abs(top_a[tok] - top_b[tok]))
        if tok_a != tok_b:
            first_divergence = i
            break
    longest = max(len(ref), len(other))
    equal = sum(1 for a, b in zip(ref, other) if a[0] == b[0])
    return {
        "positions_compared": positions,
        "generated": [len(ref), len(other)],
        "first_divergence": first_divergence,
        "equal_tokens": equal,
        "equal_token_share": round(equal / longest, 4) if longest else None,
        "values_compared": len(diffs),
        "max_abs_diff": max(diffs) if diffs else None,
        "mean_abs_diff": (sum(diffs) / len(diffs)) if diffs else None,
    }


def spread(scores):
    """How far apart the scores within one run are: the mean gap between the best and the k-th
    token of each position (the signal a wrong KV would have to move)."""
    gaps = [max(top.values()) - min(top.values()) for _tok, _lp, top in scores if len(top) > 1]
    return (sum(gaps) / len(gaps)) if gaps else None


def bound(noises, k=4.0, floor=1e-5):
    """max(k * the largest noise, floor); noises: comparisons from :func:`compare` (None ignored)."""
    values = [n["max_abs_diff"] for n in noises if n and n.get("max_abs_diff") is not None]
    return max(k * max(values, default=0.0), floor)


def verdict(cached, noises, control=None, k=4.0, floor=1e-5):
    """The check: ``cached`` (served from the cache vs fresh) within the bound from ``noises``;
    ``control`` (a wrong prefix vs fresh) shows whether that bound can tell a wrong KV apart."""
    limit = bound(noises, k, floor)
    worst = cached.get("max_abs_diff")
    out = {"bound": limit, "k": k, "floor": floor,
           "noise_max_abs_diff": max((n["max_abs_diff"] for n in noises
                                      if n and n.get("max_abs_diff") is not None), default=None),
           "cached_max_abs_diff": worst,
           "within_bound": worst is not None and worst <= limit and cached.get("positions_compared", 0) > 0}
    if control is not None:
        ctl = control.get("max_abs_diff")
        out["control_max_abs_diff"] = ctl
        out["control_first_divergence"] = control.get("first_divergence")
        out["discriminating"] = (ctl is not None and ctl > limit) or control.get("first_divergence") == 0
    return out
