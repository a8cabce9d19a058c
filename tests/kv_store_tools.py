# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real redis-server configured by the store plan, read through a slow link, for the break-even tests
(tests/unit/plugins/module_utils/kv/test_kv_pool_throttled_store.py, tests/playbooks/test_status_l2_break_even.py).

Test doubles, named as such:
- ``SlowLink``: a TCP forwarder on loopback that passes the store's replies at a given rate (it stands in for a slow
  network; ``tc`` on ``lo`` would slow every loopback user of the machine).
- ``lmcache_metrics_double``: LMCache's ``/metrics`` text for measured loads, in the names LMCache 0.5.6 exports (its
  ``lmcache_mp.l2_load_throughput`` histogram in GB/s per load task, through OpenTelemetry's Prometheus exporter:
  ``lmcache_mp_l2_load_throughput_GB_per_second_sum`` / ``_count``), since no LMCache server drives the store here.
  Its numbers are reads timed by :func:`timed_loads`, bytes / (completed - submitted) per load, as LMCache's own
  subscriber computes them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time

REDIS = '/usr/bin/redis-server'


class SlowLink:
    """Test double of a slow network: forwards each TCP connection to ``target``, the replies paced at ``rate``
    bytes per second (pieces of up to 64 KiB); the requests pass at full speed."""

    def __init__(self, target, rate):
        self.target, self.rate = target, rate
        self.listener = socket.create_server(('127.0.0.1', 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _address = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, upstream, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, self.rate), daemon=True).start()

    @staticmethod
    def _pipe(source, sink, rate):
        due = time.monotonic()
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
                if rate:
                    # paced, never ahead: an idle link earns no burst
                    due = max(due, time.monotonic()) + len(data) / float(rate)
                    time.sleep(max(0.0, due - time.monotonic()))
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.listener.close()


def lmcache_metrics_double(rates):
    """LMCache's /metrics text for load tasks of ``rates`` GB/s (see the module docstring)."""
    return ('# TYPE lmcache_mp_l2_load_throughput_GB_per_second histogram\n'
            'lmcache_mp_l2_load_throughput_GB_per_second_count{l2_name="valkey"} %d\n'
            'lmcache_mp_l2_load_throughput_GB_per_second_sum{l2_name="valkey"} %r\n' % (len(rates), sum(rates)))


def resp(*words):
    return b''.join([b'*%d\r\n' % len(words)] + [b'$%d\r\n%s\r\n' % (len(w), w) for w in words])


def read_bulk(stream):
    """A bulk reply's length (the value is read and dropped)."""
    header = stream.readline()
    assert header.startswith(b'$'), header
    size = int(header[1:])
    left = size + 2
    while left:
        left -= len(stream.read(min(left, 1 << 20)))
    return size


def login(port, password):
    """A connection to the store at ``port``, logged in as LMCache's user."""
    sock = socket.create_connection(('127.0.0.1', port), timeout=120)
    stream = sock.makefile('rb')
    sock.sendall(resp(b'AUTH', b'lmcache', password.encode()))
    assert stream.readline().strip() == b'+OK'
    return sock, stream


def timed_loads(port, password, keys, size):
    """GB/s of each GET of ``keys`` through ``port``: bytes / (completed - submitted), as LMCache records a load."""
    sock, stream = login(port, password)
    rates = []
    with sock:
        for key in keys:
            submitted = time.monotonic()
            sock.sendall(resp(b'GET', key))
            assert read_bulk(stream) == size
            rates.append(size / (time.monotonic() - submitted) / 1e9)
    return rates


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_store(store_plan, directory):
    """The real redis-server of ``store_plan`` (kv_store_config.plan_store; its home and configuration directory
    below ``directory``), until the block ends."""
    conf = os.path.join(str(directory), 'etc', 'fleet-kv-store.conf')
    with open(conf, 'w', encoding='utf-8') as handle:
        handle.write('\n'.join(line for line in store_plan['config_lines'] if line != 'supervised systemd') + '\n')
    with open(os.path.join(str(directory), 'etc', 'users.acl'), 'w', encoding='utf-8') as handle:
        handle.write('\n'.join(store_plan['acl_lines']) + '\n')
    server = subprocess.Popen([REDIS, conf], stdout=subprocess.DEVNULL)
    try:
        yield server
    finally:
        server.terminate()
        server.wait(10)


def fill(port, password, keys, size):
    """SET each of ``keys`` to ``size`` zero bytes as LMCache's user, once the store answers."""
    for _attempt in range(100):
        try:
            sock, _stream = login(port, password)
            sock.close()
            break
        except (OSError, AssertionError):
            time.sleep(0.05)
    sock, stream = login(port, password)
    with sock:
        for key in keys:
            sock.sendall(resp(b'SET', key, bytes(size)))
            assert stream.readline().strip() == b'+OK'
