# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pure parts of benchmarks/fleet_benchmark.py: PLAY RECAP parsing and probe overlap."""

from __future__ import absolute_import, division, print_function

import os

import pytest


@pytest.fixture(scope="module")
def bench(repo_script):
    return repo_script("benchmarks/fleet_benchmark.py")


RECAP = """
PLAY RECAP *********************************************************************
fleet-bench-01             : ok=20   changed=3    unreachable=0    failed=0    skipped=1    rescued=0    ignored=0
fleet-bench-02             : ok=19   changed=0    unreachable=1    failed=2    skipped=1    rescued=0    ignored=0
localhost                  : ok=1    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
"""


def test_recap_reads_the_last_recap(bench):
    older = RECAP.replace("changed=3", "changed=9")
    got = bench.recap(older + "\nPLAY [x]\n" + RECAP)
    assert got["fleet-bench-01"] == {"ok": 20, "changed": 3, "unreachable": 0, "failed": 0}
    assert got["fleet-bench-02"] == {"ok": 19, "changed": 0, "unreachable": 1, "failed": 2}
    assert set(got) == {"fleet-bench-01", "fleet-bench-02", "localhost"}


@pytest.mark.parametrize("intervals, most, parallelism", [
    ([], 0, None),
    ([(0.0, 10.0)], 1, 1.0),
    # one after the other: never two at once, no parallelism
    ([(0.0, 10.0), (10.0, 20.0), (20.0, 30.0)], 1, 1.0),
    # all at once: three running together, 3x the work in the same span
    ([(0.0, 10.0), (0.0, 10.0), (0.0, 10.0)], 3, 3.0),
    ([(0.0, 10.0), (5.0, 15.0), (20.0, 30.0)], 2, 1.0),
    ([(0.0, 20.0), (2.0, 22.0)], 2, 1.82),
])
def test_overlap(bench, intervals, most, parallelism):
    assert bench.overlap(intervals) == (most, parallelism)


def test_probe_intervals_count_only_launches(bench):
    states = {
        "a": {"entries": [{"probed_at": "2026-01-01T00:00:10.000000Z", "probe_elapsed_s": 10, "cmd": ["vllm"]}]},
        # taken from the journal or a cache: nothing was launched
        "b": {"entries": [{"probed_at": "2026-01-01T00:00:12.000000Z", "probe_elapsed_s": None, "cmd": None}]},
        "c": {"entries": [{"probed_at": "2026-01-01T00:00:15.000000Z", "probe_elapsed_s": 8.5, "cmd": ["vllm"]}]},
    }
    got = bench.probe_intervals(states)
    assert [round(e - s, 1) for s, e in got] == [10.0, 8.5]
    assert got[0][0] < got[1][0]


def test_inventory_has_every_host_in_the_hybrid_group(bench, tmp_path):
    hosts = bench.host_names(3)
    assert hosts == ["fleet-bench-01", "fleet-bench-02", "fleet-bench-03"]
    inv = bench.write_inventory(str(tmp_path / "inv"), hosts)
    text = open(os.path.join(inv, "hosts.yml")).read()
    assert "fleet_cpu_hybrid:" in text and all("            %s:" % h in text for h in hosts)
    assert os.path.isdir(os.path.join(inv, "group_vars"))
