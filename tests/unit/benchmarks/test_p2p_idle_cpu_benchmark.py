# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The figures of benchmarks/p2p_idle_cpu_benchmark.py: CPU seconds from a /proc/<pid>/stat line (a command name
with spaces and parens included), the cores a process kept busy, and the P2P member's argv built from the
collection's P2P flags."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope='module')
def bench(repo_script):
    return repo_script('benchmarks/p2p_idle_cpu_benchmark.py')


def test_cpu_seconds_are_utime_plus_stime_after_the_command_name(bench):
    tick = os.sysconf('SC_CLK_TCK')
    line = '4242 (lm cache) srv) S 1 4242 4242 0 -1 4194560 100 0 0 0 %d %d 0 0 20 0 24 0' % (3 * tick, tick)
    assert bench.cpu_seconds(line) == pytest.approx(4.0)


def test_cores_is_cpu_time_over_wall_time(bench):
    assert bench.cores(10.0, 39.6, 30.0) == pytest.approx(0.987)
    assert bench.cores(1.0, 1.0, 30.0) == 0
    assert bench.cores(1.0, 2.0, 0) is None


def test_a_member_gets_the_collections_p2p_flags_and_a_plain_server_none(bench):
    plain = bench.server_argv('/venv/bin/lmcache', 0)
    member = bench.server_argv('/venv/bin/lmcache', 1, bench.p2p_values(1))
    assert plain[:2] == ['/venv/bin/lmcache', 'server'] and '--instance-id' not in plain
    assert member[:len(plain)] != plain  # its own ports
    tail = member[member.index('--instance-id'):]
    assert tail == ['--instance-id', 'bench-1', '--coordinator-url', 'http://127.0.0.1:9390',
                    '--coordinator-advertise-ip', '127.0.0.1', '--p2p-advertise-url', '127.0.0.1:5591',
                    '--p2p-listen-url', '127.0.0.1:5591', '--p2p-transfer-engine', 'nixl']
