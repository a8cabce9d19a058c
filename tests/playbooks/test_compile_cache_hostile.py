# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The warm first start against a hostile service user (vLLM runs the vendor's model code as that user): a link
it plants in its HOME is never followed by root when packing or unpacking, a tarball holding a device node or a
member outside the caches is refused whole, and what is unpacked belongs to the service user. Every path lies
below tmp_path; the tests run as root (as the deploy does)."""

from __future__ import annotations

import io
import json
import os
import tarfile

import pytest
import yaml

from fleet_playbook_helpers import REPO_ROOT
from test_compile_cache_transfer import INPUTS, run as transfer

SEED = os.path.join(REPO_ROOT, 'tests', 'playbooks', 'compile_cache_seed_only.yml')
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root (chown to the service user)')


def seed(runner, tmp_path, members):
    """Unpack a tarball of ``members`` [(TarInfo, bytes or None)] into tmp_path/home as the user nobody."""
    tarball = tmp_path / 'control' / 'hostile.tar.gz'
    tarball.parent.mkdir(exist_ok=True)
    with tarfile.open(str(tarball), 'w:gz') as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    hosts = {}
    for name in ('src', 'dst'):
        hosts[name] = {'ansible_connection': 'local', 'ansible_python_interpreter': '{{ ansible_playbook_python }}',
                       'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_home': str(tmp_path / 'home'),
                       'vllm_server_user': 'nobody', 'vllm_server_group': 'nogroup'}
    inventory = tmp_path / 'hosts.yml'
    inventory.write_text(yaml.safe_dump({'all': {'hosts': hosts}}))
    extra = tmp_path / 'extra.json'
    extra.write_text(json.dumps({'test_probe_inputs': INPUTS, 'test_tarball': str(tarball)}))
    return runner.run(SEED, str(inventory), '-e', '@%s' % extra)


def regular(name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o4755
    return info, data


def directory(name):
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    return info, None


def service_home(tmp_path):
    home = tmp_path / 'home'
    home.mkdir()
    os.chown(str(home), 65534, 65534)
    return home


def test_pack_never_follows_a_link_the_service_user_planted(runner, tmp_path):
    outside = tmp_path / 'root-only' / 'cache' / 'abc'
    outside.mkdir(parents=True)
    (outside / 'shadow').write_text('root secret\n')
    os.chmod(str(outside / 'shadow'), 0o600)
    compiled = tmp_path / 'home' / 'cache' / 'torch_compile_cache' / 'deadbeef'
    compiled.mkdir(parents=True)
    (compiled / 'graph.py').write_text('graph = 1\n')
    os.symlink(str(tmp_path / 'root-only'), str(tmp_path / 'home' / '.triton'))  # ~/.triton -> a root directory
    got = transfer(runner, tmp_path, INPUTS, test_src_cleared=False)
    with tarfile.open(got['src']['packed']['path']) as tar:
        names = tar.getnames()
    assert 'cache/torch_compile_cache/deadbeef/graph.py' in names
    assert not [n for n in names if n.startswith('.triton') or 'shadow' in n], names
    assert (outside / 'shadow').read_text() == 'root secret\n'


def test_unpack_writes_the_service_users_files_without_setuid(runner, tmp_path):
    home = service_home(tmp_path)
    code, output = seed(runner, tmp_path, [directory('.triton/cache'), directory('.triton/cache/abc'),
                                           regular('.triton/cache/abc/kernel.cubin', b'\x7fELF')])
    assert code == 0, output[-6000:]
    kernel = home / '.triton' / 'cache' / 'abc' / 'kernel.cubin'
    assert kernel.read_bytes() == b'\x7fELF'
    for path in (kernel, kernel.parent, home / '.triton'):
        st = os.lstat(str(path))
        assert (st.st_uid, st.st_gid) == (65534, 65534), path
    assert os.stat(str(kernel)).st_mode & 0o7777 == 0o755


def test_unpack_never_writes_through_a_planted_link_nor_chowns_its_target(runner, tmp_path):
    home = service_home(tmp_path)
    target = tmp_path / 'var'
    target.mkdir()
    os.symlink(str(target), str(home / '.triton'))  # ~/.triton -> /var
    code, output = seed(runner, tmp_path, [directory('.triton/cache'), regular('.triton/cache/x', b'x')])
    assert code != 0 and 'symbolic link' in output, output[-6000:]
    assert os.listdir(str(target)) == [] and os.stat(str(target)).st_uid == 0


@pytest.mark.parametrize('member', [
    'device', 'fifo', 'symlink', 'outside', 'dotdot'])
def test_unpack_refuses_a_tarball_with_anything_but_files_and_directories_below_the_caches(runner, tmp_path, member):
    home = service_home(tmp_path)
    info = tarfile.TarInfo('.triton/cache/evil')
    if member == 'device':
        info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    elif member == 'fifo':
        info.type = tarfile.FIFOTYPE
    elif member == 'symlink':
        info.type, info.linkname = tarfile.SYMTYPE, '/etc/shadow'
    elif member == 'outside':
        info.name, info.size = '.bashrc', 0
    else:
        info.name, info.size = '.triton/cache/../../.profile', 0
    code, output = seed(runner, tmp_path, [regular('.triton/cache/ok', b'ok'), (info, b'' if info.isreg() else None)])
    assert code != 0 and 'are refused' in output, output[-6000:]
    assert os.listdir(str(home)) == [], 'nothing is written when one member is refused'
