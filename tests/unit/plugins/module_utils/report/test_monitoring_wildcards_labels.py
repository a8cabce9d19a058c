# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One rule for wildcard binds (every IPv4 and IPv6 spelling), read the same by the host plan's URLs, the status
module, the KV store (its endpoint, health check and exporter) and the monitoring targets; and the labels
monitoring may add."""

from __future__ import annotations

import ast
import os

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import addresses
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import fleet_report
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status import service_gather
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_config, kv_store_exporter
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_rules import FleetRuleError

V4_WILDCARDS = ['', '*', '0.0.0.0', '::ffff:0.0.0.0']
V6_WILDCARDS = ['::', '[::]', '0:0:0:0:0:0:0:0', '::0', '0000:0000::0000', '[0:0:0:0:0:0:0:0]']
NOT_WILDCARDS = ['127.0.0.1', '::1', '10.0.0.5', 'fd00::5', 'gpu-01.example.internal', '0.0.0.1', 'localhost']


def status_dials(bind):
    """The address the status module (service_gather.url) dials for a server bound to ``bind``."""
    host = service_gather.url(bind, 9, '/x')[len('http://'):-len(':9/x')]
    return host.strip('[]')


def exporter_dials(bind):
    """The address the KV store's exporter dials for a store bound to ``bind`` (its -redis.addr)."""
    addr = kv_store_exporter.argv({'store_bind': bind, 'bind': '127.0.0.1', 'port': 9121}, 6379)[1]
    return addr[len('-redis.addr=redis://'):-len(':6379')].strip('[]')


@pytest.mark.parametrize('bind', V4_WILDCARDS + V6_WILDCARDS)
def test_every_wildcard_spelling_is_read_as_a_wildcard(bind):
    assert addresses.is_wildcard(bind)
    want = '127.0.0.1' if bind in ('', '*', '0.0.0.0') else '::1'
    assert addresses.url_host(bind).strip('[]') == want
    assert status_dials(bind) == want
    assert exporter_dials(bind) == want
    assert kv_store_config.store_endpoint('kv-1', {'kv_store_bind': bind, 'kv_store_port': 6379,
                                                   'ansible_host': '10.0.0.9'}, {}) == ('10.0.0.9', 6379)


@pytest.mark.parametrize('bind', NOT_WILDCARDS)
def test_other_addresses_are_not_wildcards(bind):
    assert not addresses.is_wildcard(bind)
    assert status_dials(bind) == bind
    assert exporter_dials(bind) == bind
    assert kv_store_config.store_endpoint('kv-1', {'kv_store_bind': bind, 'kv_store_port': 6379,
                                                   'ansible_host': '10.0.0.9'}, {}) == (bind, 6379)


def test_the_rule_is_written_once():
    root = os.path.dirname(os.path.dirname(addresses.__file__))
    defined = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith('.py'):
                with open(os.path.join(folder, name)) as handle:
                    text = handle.read()
                tree = ast.parse(text)
                defined.extend((name, node.name) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                               and node.name in ('is_wildcard', 'is_loopback', 'url_host'))
                if name.startswith('kv_store') or name.startswith('kv_pool'):
                    assert "'0.0.0.0'" not in text, '%s spells a wildcard itself: use addresses' % name
    assert sorted(defined) == [('addresses.py', 'is_loopback'), ('addresses.py', 'is_wildcard'),
                               ('addresses.py', 'url_host')]


def endpoint(**overrides):
    item = {'host': 'gpu-01', 'address': '10.0.0.11', 'model': 'm', 'vllm_host': '0:0:0:0:0:0:0:0', 'vllm_port': 8000,
            'lmcache_http_host': '[::]', 'lmcache_http_port': 8080}
    item.update(overrides)
    return item


def test_ipv6_wildcard_binds_are_scraped_at_the_host_address():
    out = fleet_report.file_sd_targets([endpoint()])
    assert [g['targets'] for g in out['targets']] == [['10.0.0.11:8000'], ['10.0.0.11:8080']]
    assert out['skipped'] == []


@pytest.mark.parametrize('labels, words', [
    ({'host': 'x'}, 'fleet_monitoring_labels sets host, which the collection sets on every target'),
    ({'service': 'x'}, 'fleet_monitoring_labels sets service, which the collection sets on every target'),
    ({'__address__': 'evil:1'}, 'fleet_monitoring_labels sets __address__: names starting with __ are'),
    ({'__meta_x': 'y'}, 'fleet_monitoring_labels sets __meta_x: names starting with __ are'),
    ({'1abc': 'y'}, "fleet_monitoring_labels sets '1abc', which is not a Prometheus label name"),
    ({'team': ['a']}, "fleet_monitoring_labels sets team to ['a']; a label value is a string"),
])
def test_reserved_or_invalid_labels_are_refused(labels, words):
    with pytest.raises(FleetRuleError) as error:
        fleet_report.file_sd_targets([endpoint(labels=labels)])
    assert words in str(error.value)


def test_allowed_labels_are_added():
    out = fleet_report.file_sd_targets([endpoint(labels={'cluster': 'eu-1', 'job': 'fleet', 'instance': 'gpu-01'})])
    assert out['targets'][0]['labels'] == {'host': 'gpu-01', 'model': 'm', 'service': 'vllm', 'cluster': 'eu-1',
                                           'job': 'fleet', 'instance': 'gpu-01'}


def test_one_message_for_labels_every_host_shares():
    with pytest.raises(FleetRuleError) as error:
        fleet_report.file_sd_targets([endpoint(labels={'host': 'x'}), endpoint(host='gpu-02', labels={'host': 'x'})])
    assert str(error.value).count('sets host') == 1
