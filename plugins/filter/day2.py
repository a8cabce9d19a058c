# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the monitoring playbook (the logic lives in module_utils; the status table is the filter
``fleet_table``).

``fleet_file_sd`` builds the Prometheus ``file_sd`` target list of ``playbooks/monitoring.yml``, ``kv_store_file_sd``
that of the KV stores' exporters;
``prometheus_samples`` reads the Prometheus text format (``GET /metrics``).

Documentation: ``plugins/filter/fleet_file_sd.yml``, ``kv_store_file_sd.yml``, ``prometheus_samples.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.report import fleet_report
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_store_exporter
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.fleet_rules import FleetRuleError, monitoring_label_errors
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.status.prometheus_text import PrometheusTextError, parse


def _list_of_dicts(value, name):
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, dict) for v in value):
        raise AnsibleFilterError('%s expects a list of dictionaries' % name)
    return [dict(v) for v in value]


def fleet_file_sd(hosts):
    """``{'targets': [...], 'skipped': [...]}`` for Prometheus file_sd."""
    try:
        return fleet_report.file_sd_targets(_list_of_dicts(hosts, 'fleet_file_sd'))
    except FleetRuleError as e:
        raise AnsibleFilterError('fleet_file_sd: %s' % e)


def kv_store_file_sd(stores):
    """``{'targets': [...], 'skipped': [...]}`` of the KV stores' exporters for Prometheus file_sd."""
    stores = _list_of_dicts(stores, 'kv_store_file_sd')
    errors = []
    for item in stores:
        errors.extend(e for e in monitoring_label_errors(item.get('labels')) if e not in errors)
    if errors:
        raise AnsibleFilterError('kv_store_file_sd: %s' % '; '.join(errors))
    return kv_store_exporter.scrape_targets(stores)


def prometheus_samples(text, strict=False):
    """``[{'name', 'labels', 'value'}]`` of a /metrics text."""
    if isinstance(text, (list, tuple)):
        text = '\n'.join(str(line) for line in text)
    if text is not None and not isinstance(text, str):
        raise AnsibleFilterError('prometheus_samples expects the text of a /metrics answer')
    try:
        return [{'name': n, 'labels': labels, 'value': value} for n, labels, value in parse(text, strict=strict)]
    except PrometheusTextError as e:
        raise AnsibleFilterError('prometheus_samples: %s' % e)


class FilterModule:
    """lmcache_vllm.fleet monitoring filters."""

    def filters(self):
        return {
            'fleet_file_sd': fleet_file_sd,
            'kv_store_file_sd': kv_store_file_sd,
            'prometheus_samples': prometheus_samples,
        }
