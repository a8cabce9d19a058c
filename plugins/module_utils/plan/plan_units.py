# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host plan's units: the lines of each unit and environment file, escaped with ``systemd_quote``.

``lmcache_service`` and ``vllm_service`` turn the checked values and the derived ones into a service of
the plan: its paths, argv, environment, environment file and unit lines. The templates only place these
lines. ``c`` is validation's result (``plan_validate.checked_values``): every variable by its full name, typed as
its argument spec declares; nothing here reads the raw settings or coerces a value again.
"""

from __future__ import annotations

import json

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import addresses
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import fleet_rules
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_p2p
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.kv import kv_pool
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import ownership
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import package_spec
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import systemd_quote as sq
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import systemd_unit
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.cli import vllm_cli
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan.plan_variables import (
    PER_VERSION, fmt_value)

# Paths of the collection's own files on a host (one place; the roles' vars/main.yml hold none).
UNIT_DIR = '/etc/systemd/system'
WAIT_READY = 'bin/fleet-wait-ready'
# Shared-memory KV segments the connector's CPU path leaves behind when vLLM exits ("+": as root).
EXEC_STOP_POST = "+/bin/sh -c 'rm -f /dev/shm/lmcache_kv_*'"
# Sandboxing of both units. GPUs, /dev/shm and the IPC namespace stay shared between LMCache and
# vLLM: no PrivateDevices=, DevicePolicy=, PrivateIPC= or RemoveIPC=; no MemoryDenyWriteExecute=
# (Triton and torch.compile write executable code); no ProtectClock= (it implies DeviceAllow=, which
# closes every other device, the GPUs too); ReadWritePaths= adds each unit's own folders.
HARDENING = (
    'NoNewPrivileges=true',
    'ProtectSystem=strict',
    'ProtectHome=true',
    'PrivateTmp=true',
    'ProtectKernelTunables=true',
    'ProtectKernelModules=true',
    'ProtectKernelLogs=true',
    'ProtectControlGroups=true',
    'ProtectHostname=true',
    'RestrictNamespaces=true',
    'RestrictRealtime=true',
    'RestrictSUIDSGID=true',
    'LockPersonality=true',
    'SystemCallArchitectures=native',
    'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK',
    'CapabilityBoundingSet=',
    'AmbientCapabilities=',
    'UMask=0027',
)
# StartLimitBurst= of each unit and the slack TimeoutStartSec= leaves above the readiness wait.
START_LIMIT = {'lmcache_server': (5, 30), 'vllm_server': (3, 60)}


def _unit_common(name, c, prefix):
    config_dir = str(c['%s_config_dir' % prefix] or '').rstrip('/')
    venv = str(c['%s_venv' % prefix] or '').rstrip('/')
    start = c['%s_start_timeout' % prefix] or 0
    restart = c['%s_restart_sec' % prefix] or 0
    burst, slack = START_LIMIT[prefix]
    return {
        'service_name': name,
        'unit_name': '%s.service' % name,
        'unit_path': '%s/%s.service' % (UNIT_DIR, name),
        'env_path': '%s/%s.env' % (config_dir, name),
        'config_dir': config_dir,
        'venv': venv,
        'venvs_dir': str(c['%s_venvs_dir' % prefix] or '').rstrip('/'),
        'venvs_keep': c['%s_venvs_keep' % prefix] or 2,
        'python': '%s/bin/python' % venv,
        'wait_ready': '%s/%s' % (venv, WAIT_READY),
        'start_timeout': start,
        'restart_sec': restart,
        'stop_timeout': c['%s_stop_timeout' % prefix] or 0,
        'timeout_start_sec': start + slack,
        'start_limit_burst': burst,
        'start_limit_interval_sec': (start + restart) * burst,
        'enabled': c['%s_service_enabled' % prefix] is not False,
        'unit_verify': c['%s_unit_verify' % prefix] is not False,
        'hardening': list(HARDENING),
        'marker': ownership.UNIT_MARKER,
        'per_version_venv': prefix in c[PER_VERSION],
    }


def _finish(service, argv, environment, env_file, secret_names=()):
    service['argv'] = [str(a) for a in argv]
    service['exec_start'] = sq.exec_line(service['argv'])
    service['environment'] = environment
    service['environment_lines'] = [sq.environment_assignment(k, v) for k, v in environment.items()]
    service['env_file'] = env_file
    service['env_file_lines'] = [sq.env_file_line(k, v) for k, v in env_file.items()]
    service['env_file_shown'] = dict((k, '<redacted>' if k in secret_names else v) for k, v in env_file.items())
    service['env_file_lines_redacted'] = [sq.env_file_line(k, v) for k, v in service['env_file_shown'].items()]
    service['read_write_paths_line'] = ' '.join('-' + sq.exec_word(path) for path in service['read_write_paths'])
    service['exec_start_post'] = sq.exec_line([service['python'], service['wait_ready'], service['health_url'],
                                               str(service['start_timeout'])], continuation=False)
    service['description_line'] = sq.specifier_text(service['description'])
    return service


def unit_lines(service, documentation, after, requires=None):
    """The lines of a unit file (after the managed-by comment), from a service of the plan."""
    lines = ['Type=exec',
             'User=%s' % service['user'],
             'Group=%s' % service['group'],
             'WorkingDirectory=%s' % service['home']]
    lines += ['Environment=%s' % line for line in service['environment_lines']]
    lines += ['EnvironmentFile=%s' % service['env_path'],
              'ExecStart=%s' % service['exec_start'],
              'ExecStartPost=%s' % service['exec_start_post']]
    if service.get('exec_stop_post'):
        lines.append('ExecStopPost=%s' % service['exec_stop_post'])
    lines += ['KillSignal=SIGTERM',
              'Restart=on-failure',
              'RestartSec=%d' % service['restart_sec'],
              'TimeoutStartSec=%d' % service['timeout_start_sec'],
              'TimeoutStopSec=%d' % service['stop_timeout'],
              'ReadWritePaths=%s' % service['read_write_paths_line']]
    return systemd_unit.unit_file(service['description_line'], documentation, lines + service['hardening'],
                                  after=after, requires=requires or (),
                                  start_limit=(service['start_limit_interval_sec'], service['start_limit_burst']))


def lmcache_service(c, derived, lm, gpus, kv=None):
    """The LMCache service of the plan (``lm``: the checked LMCache values; ``gpus``: lmcache_server_gpus)."""
    name = c['lmcache_server_service_name']
    service = _unit_common(name, c, 'lmcache_server')
    venv = str(c['lmcache_server_venv'] or '').rstrip('/')
    home = c['lmcache_server_home']
    packages = fleet_rules.lmcache_packages(c['lmcache_server_version'])
    service.update({
        'bin': '%s/bin/lmcache' % venv,
        'user': c['lmcache_server_user'],
        'group': c['lmcache_server_group'],
        'home': home,
        'read_write_paths': [home],
        'health_url': 'http://%s:%s/healthcheck' % (addresses.url_host(c['lmcache_server_http_host']),
                                                    c['lmcache_server_http_port']),
        'metrics_url': 'http://%s:%s/metrics' % (addresses.url_host(c['lmcache_server_http_host']),
                                                 c['lmcache_server_http_port']),
        'start_timeout': c['lmcache_server_start_timeout'] or 0,
        'description': 'LMCache server (chunk size %s)' % derived.get('chunk_size'),
        'exec_stop_post': EXEC_STOP_POST,
        'device': c['lmcache_server_device'],
        'packages': packages,
        'pip': package_spec.lmcache_pip(c, venv, packages),
        'host': c['lmcache_server_host'],
        'port': c['lmcache_server_port'],
        'http_host': c['lmcache_server_http_host'],
        'http_port': c['lmcache_server_http_port'],
    })
    environment = {'HOME': home, 'PYTHONHASHSEED': '0', 'LMCACHE_LOG_LEVEL': lm['log_level'] or 'INFO',
                   'LMCACHE_TRACK_USAGE': 'true' if lm['track'] else 'false'}
    if not lm['track']:
        environment['DO_NOT_TRACK'] = '1'
    if gpus:
        environment['CUDA_VISIBLE_DEVICES'] = ','.join(str(g) for g in gpus)
    env_file = dict(sorted(lm['env'].items()))
    service['p2p_status'] = {'p2p': False, 'coordinator_service': None, 'coordinator_health_url': None}
    service['coordinator_service_name'] = '%s%s' % (name, kv_p2p.COORDINATOR_SUFFIX)
    service['coordinator_unit_path'] = '%s/%s.service' % (UNIT_DIR, service['coordinator_service_name'])
    argv = kv_pool.launch(c, service, lmcache_argv(c, service, derived, lm), env_file, kv)
    # what the role reads of the virtualenv's installed versions
    service['pip']['names'] = ['torch', 'lmcache', kv_pool.CLIENT_NAME] + (
        [service['pip']['kv_p2p_name']] if service['pip'].get('kv_p2p_name') else [])
    service = _finish(service, argv, environment, env_file, secret_names=(kv_pool.ADAPTER_ENV,))
    service['unit_lines'] = unit_lines(service, 'https://docs.lmcache.ai/', [])
    if service.get('coordinator'):
        service['coordinator'] = coordinator_service(service)
    return service


def coordinator_service(lmcache):
    """A P2P pool's coordinator on its coordinator host (kv_p2p): ``lmcache coordinator`` from LMCache's virtualenv,
    as LMCache's user, with LMCache's environment and sandbox, in a unit of its own (``<service>-coordinator``)."""
    asked, name = lmcache['coordinator'], lmcache['coordinator_service_name']
    service = dict((k, v) for k, v in lmcache.items() if k not in ('coordinator', 'pip', 'kv_launcher'))
    service.update(service_name=name, unit_name='%s.service' % name, unit_path=lmcache['coordinator_unit_path'],
                   health_url=asked['health_url'], description='LMCache coordinator of an L2 pool (P2P)',
                   exec_stop_post=None, metrics_url=None)
    service = _finish(service, asked['argv'], lmcache['environment'], lmcache['env_file'],
                      secret_names=(kv_pool.ADAPTER_ENV,))
    service['unit_lines'] = unit_lines(service, 'https://docs.lmcache.ai/', [])
    return service


def lmcache_argv(c, service, derived, lm):
    """``lmcache server``'s command line."""
    argv = [service['bin'], 'server',
            '--host', c['lmcache_server_host'], '--port', c['lmcache_server_port'],
            '--http-host', c['lmcache_server_http_host'], '--http-port', c['lmcache_server_http_port'],
            '--chunk-size', derived.get('chunk_size'),
            '--separate-object-groups' if derived.get('separate_object_groups') else '--no-separate-object-groups',
            '--l1-size-gb', fmt_value(lm['l1']),
            '--eviction-policy', c['lmcache_server_eviction_policy'],
            '--supported-transfer-mode', c['lmcache_server_supported_transfer_mode']]
    if derived.get('max_gpu_workers') is not None:
        argv += ['--max-gpu-workers', derived['max_gpu_workers']]
    return argv + lm['extra']


def vllm_service(c, derived, v):
    """The vLLM service of the plan (``v``: the checked vLLM values with the inputs of N and the secrets)."""
    service = _vllm_fields(c, derived, v)
    environment, env_file = _vllm_environment(service, v)
    # The probe runs as the service's user with the service's environment, secrets left out (the role
    # passes them apart, with no_log).
    probe_env = dict((k, val) for k, val in environment.items()
                     if k not in ('VLLM_ENGINE_READY_TIMEOUT_S', 'LMCACHE_TRACK_USAGE'))
    probe_env.update(v['env'])
    service['probe_env'] = probe_env
    service = _finish(service, vllm_argv(c, service, derived, v), environment, env_file,
                      secret_names=('VLLM_API_KEY', 'HF_TOKEN'))
    service['unit_lines'] = unit_lines(service, 'https://docs.vllm.ai/', [service['lmcache_unit']],
                                       requires=[service['lmcache_unit']] if service['connector'] else [])
    return service


def _vllm_fields(c, derived, v):
    """The vLLM service's paths, URLs, account, packages and GPUs."""
    name = c['vllm_server_service_name']
    service = _unit_common(name, c, 'vllm_server')
    venv = str(c['vllm_server_venv'] or '').rstrip('/')
    home = c['vllm_server_home']
    hf_home = c['vllm_server_hf_home']
    config_dir = str(c['vllm_server_config_dir'] or '').rstrip('/')
    connector = derived.get('kv_transfer_config') is not None
    model = v['model'] or ''
    service.update({
        'bin': '%s/bin/vllm' % venv,
        'user': c['vllm_server_user'],
        'group': c['vllm_server_group'],
        'home': home,
        'hf_home': hf_home,
        'read_write_paths': [home] + ([hf_home] if not str(hf_home).startswith(str(home).rstrip('/') + '/') else []),
        'fingerprint_path': '%s/%s.fingerprint' % (config_dir, name),
        'health_url': 'http://%s:%s/health' % (addresses.url_host(c['vllm_server_host']), c['vllm_server_port']),
        'metrics_url': 'http://%s:%s/metrics' % (addresses.url_host(c['vllm_server_host']), c['vllm_server_port']),
        'start_timeout': c['vllm_server_start_timeout'] or 0,
        'description': 'vLLM OpenAI-compatible server (%s, N=%s)' % (model, derived.get('block_size')),
        'lmcache_unit': '%s.service' % c['vllm_server_lmcache_service_name'],
        'connector': connector,
        'exec_stop_post': EXEC_STOP_POST if connector else None,
        'package': c['vllm_server_package'],
        'pip': package_spec.vllm_pip(c, venv),
        'device': v['device'],
        'tensor_parallel_size': v['tp'],
        'gpus': list(v['gpus'] or []),
        'host': c['vllm_server_host'],
        'port': c['vllm_server_port'],
        'model': model,
        'served_model_name': v['served'] or model,
        'prefetch': c['vllm_server_prefetch_model'] is True and bool(model) and not model.startswith('/'),
        'prefetch_helper': '%s/bin/fleet-prefetch' % venv,
        'prefetch_margin_gb': c['vllm_server_prefetch_margin_gb'],
    })
    return service


def vllm_argv(c, service, derived, v):
    """``vllm serve``'s command line: the inputs of N (``vllm_cli``), the derived values, extra_args, the connector."""
    model = service['model']
    argv = [service['bin'], 'serve', model,
            '--host', c['vllm_server_host'], '--port', c['vllm_server_port'],
            '--served-model-name', v['served'] or model]
    if v['n_inputs'].get('revision'):
        # the revision the probe and the prediction read (vllm_server_model_revision): an input of N
        argv += ['--revision', v['n_inputs']['revision']]
    argv += vllm_cli.n_input_argv(v['n_inputs'], explicit=True)
    argv += ['--enable-prefix-caching'] if derived.get('enable_prefix_caching') else ['--no-enable-prefix-caching']
    if derived.get('mamba_cache_mode') is not None:
        argv += ['--mamba-cache-mode', derived['mamba_cache_mode']]
    if derived.get('max_num_batched_tokens') is not None:
        argv += ['--max-num-batched-tokens', derived['max_num_batched_tokens']]
    if derived.get('max_num_seqs') is not None:
        argv += ['--max-num-seqs', derived['max_num_seqs']]
    if v['max_len'] is not None:
        argv += ['--max-model-len', v['max_len']]
    if v['gpu_util'] is not None:
        argv += ['--gpu-memory-utilization', fmt_value(v['gpu_util'])]
    if v['lm_only']:
        argv += ['--language-model-only']
    if v['load_format'] not in (None, 'auto'):
        argv += ['--load-format', v['load_format']]
    if v['eager']:
        argv += ['--enforce-eager']
    argv += v['extra']
    if service['connector']:
        argv += ['--kv-transfer-config', json.dumps(derived['kv_transfer_config'], sort_keys=True, separators=(',', ':'))]
    return argv


def _vllm_environment(service, v):
    """(the unit's Environment=, its EnvironmentFile= with the secrets and vllm_server_env)."""
    home = service['home']
    environment = {'HOME': home, 'HF_HOME': service['hf_home'], 'VLLM_CACHE_ROOT': '%s/cache' % str(home).rstrip('/'),
                   'PYTHONHASHSEED': '0', 'VLLM_ENGINE_READY_TIMEOUT_S': str(service['start_timeout']),
                   'VLLM_NO_USAGE_STATS': '1', 'DO_NOT_TRACK': '1'}
    if service['connector']:
        environment['LMCACHE_TRACK_USAGE'] = 'false'
    if v['gpus']:
        environment['CUDA_VISIBLE_DEVICES'] = ','.join(str(g) for g in v['gpus'])
    if v['device'] == 'cpu' and v['kv_space'] is not None:
        environment['VLLM_CPU_KVCACHE_SPACE'] = str(v['kv_space'])
    env_file = {}
    if v['secrets']['vllm_server_api_key']:
        env_file['VLLM_API_KEY'] = v['secrets']['vllm_server_api_key']
    if v['secrets']['vllm_server_hf_token']:
        env_file['HF_TOKEN'] = v['secrets']['vllm_server_hf_token']
    for key, value in sorted(v['env'].items()):
        env_file[key] = value
    return environment, env_file
