# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The score-level comparison of the GPU acceptance, on /v1/completions answers (no GPU needed)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import scores  # noqa: E402


def answer(tokens, lps, tops):
    return {"choices": [{"text": "".join(tokens), "logprobs": {
        "tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": list(range(len(tokens)))}}]}


FRESH = answer(["a", "b", "c"], [-1.0, -2.0, -0.5],
               [{"a": -1.0, "x": -3.0}, {"b": -2.0, "y": -2.5}, {"c": -0.5, "z": -4.0}])


def test_choice_scores_reads_tokens_logprobs_and_tops():
    got = scores.choice_scores(FRESH)
    assert got[1] == ("b", -2.0, {"b": -2.0, "y": -2.5})
    assert scores.choice_scores({"choices": [{"text": "x"}]}) == []
    assert scores.choice_scores({"error": "boom"}) == []


def test_identical_runs_differ_by_zero():
    s = scores.choice_scores(FRESH)
    cmp_ = scores.compare(s, s)
    assert cmp_["max_abs_diff"] == 0.0 and cmp_["mean_abs_diff"] == 0.0
    assert cmp_["equal_token_share"] == 1.0 and cmp_["first_divergence"] is None
    assert cmp_["positions_compared"] == 3 and cmp_["values_compared"] == 3 + 6


def test_compare_stops_after_the_first_divergent_token():
    other = answer(["a", "q", "c"], [-1.001, -1.9, -0.5],
                   [{"a": -1.001, "x": -3.0}, {"q": -1.9, "b": -2.2}, {"c": -9.0, "z": -9.0}])
    cmp_ = scores.compare(scores.choice_scores(FRESH), scores.choice_scores(other))
    assert cmp_["first_divergence"] == 1 and cmp_["positions_compared"] == 2
    # position 0: token and both tops; position 1: only the shared top token "b" (-2.0 vs -2.2)
    assert cmp_["max_abs_diff"] == pytest.approx(0.2)
    assert cmp_["equal_token_share"] == pytest.approx(2 / 3, abs=1e-4)  # position 2 equal again, after divergence


def test_bound_from_noise_with_a_floor():
    noise = [{"max_abs_diff": 1e-4}, {"max_abs_diff": 3e-4}, None, {"max_abs_diff": None}]
    assert scores.bound(noise, k=4, floor=1e-5) == pytest.approx(1.2e-3)
    assert scores.bound([{"max_abs_diff": 0.0}], k=4, floor=1e-5) == 1e-5


def test_verdict_passes_within_and_fails_beyond_the_bound():
    noise = [{"max_abs_diff": 1e-4}]
    ok = scores.verdict({"max_abs_diff": 3e-4, "positions_compared": 24}, noise, {"max_abs_diff": 0.5}, k=4)
    assert ok["within_bound"] and ok["discriminating"] and ok["bound"] == pytest.approx(4e-4)
    bad = scores.verdict({"max_abs_diff": 5e-4, "positions_compared": 24}, noise, {"max_abs_diff": 2e-4}, k=4)
    assert not bad["within_bound"] and not bad["discriminating"]
    nothing = scores.verdict({"max_abs_diff": None, "positions_compared": 0}, noise)
    assert not nothing["within_bound"] and "discriminating" not in nothing


def test_a_control_that_diverges_at_once_discriminates():
    out = scores.verdict({"max_abs_diff": 0.0, "positions_compared": 5}, [{"max_abs_diff": 0.0}],
                         {"max_abs_diff": 0.0, "first_divergence": 0})
    assert out["discriminating"] and out["within_bound"]


def test_spread_is_the_mean_gap_within_the_tops():
    assert scores.spread(scores.choice_scores(FRESH)) == pytest.approx((2.0 + 0.5 + 3.5) / 3)
    assert scores.spread([]) is None
