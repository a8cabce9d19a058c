# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils/shared/nofollow.py on this machine: root in a directory a service user can write opens every
component without following a link, packs only the service user's regular files and directories, and unpacks
only regular files and directories below the caches (the playbook tests run the same through the modules)."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import nofollow

DIRS = ['.triton/cache', 'cache/torch_compile_cache']


def test_open_dir_refuses_a_link_anywhere_on_the_way(tmp_path):
    (tmp_path / 'real' / 'deeper').mkdir(parents=True)
    os.symlink(str(tmp_path / 'real'), str(tmp_path / 'link'))
    os.close(nofollow.open_dir(str(tmp_path / 'real' / 'deeper')))
    with pytest.raises(nofollow.Refused, match='link'):
        nofollow.open_dir(str(tmp_path / 'link' / 'deeper'))
    with pytest.raises(nofollow.Refused, match='".."'):
        nofollow.open_dir(str(tmp_path / 'real' / '..' / 'real'))


def test_remove_path_deletes_a_tree_and_the_links_inside_it_never_their_targets(tmp_path):
    keep = tmp_path / 'keep'
    keep.mkdir()
    (keep / 'data').write_text('keep me')
    tree = tmp_path / 'home' / 'cache'
    (tree / 'sub').mkdir(parents=True)
    (tree / 'sub' / 'f').write_text('x')
    os.symlink(str(keep), str(tree / 'sub' / 'to-keep'))
    assert nofollow.remove_path(str(tree)) is True
    assert not tree.exists() and (keep / 'data').read_text() == 'keep me'
    assert nofollow.remove_path(str(tree)) is False
    os.symlink(str(keep), str(tmp_path / 'home' / 'planted'))
    with pytest.raises(nofollow.Refused):
        nofollow.remove_path(str(tmp_path / 'home' / 'planted' / 'data'))
    assert (keep / 'data').read_text() == 'keep me'


def test_pack_takes_only_the_owners_files_with_one_link(tmp_path):
    home = tmp_path / 'home'
    cache = home / '.triton' / 'cache'
    cache.mkdir(parents=True)
    (cache / 'kernel').write_text('k')
    (cache / 'others').write_text('o')
    if os.geteuid() == 0:
        os.chown(str(cache / 'others'), 65534, 65534)
    os.link(str(cache / 'kernel'), str(home / 'hardlink-outside'))
    (cache / 'single').write_text('s')
    os.symlink('/etc/passwd', str(cache / 'passwd'))
    os.mkfifo(str(cache / 'fifo'))
    out = io.BytesIO()
    packed, skipped = nofollow.pack(str(home), DIRS, out, os.geteuid())
    out.seek(0)
    with tarfile.open(fileobj=out) as tar:
        names = tar.getnames()
    assert packed == ['.triton/cache']
    assert names == ['.triton/cache', '.triton/cache/single']
    expected = {'.triton/cache/kernel', '.triton/cache/passwd', '.triton/cache/fifo'}
    if os.geteuid() == 0:
        expected.add('.triton/cache/others')
    assert expected <= set(skipped)


def member(name, kind=tarfile.REGTYPE):
    info = tarfile.TarInfo(name)
    info.type = kind
    return info


@pytest.mark.parametrize('info, problem', [
    (member('/etc/x'), 'leaves the directory'),
    (member('.triton/cache/../../x'), 'leaves the directory'),
    (member('.bashrc'), 'is not below the compile caches'),
    (member('.triton/cache/dev', tarfile.CHRTYPE), 'is not a regular file or a directory'),
    (member('.triton/cache/l', tarfile.LNKTYPE), 'is not a regular file or a directory'),
])
def test_member_problems(info, problem):
    (found,) = nofollow.member_problems([member('.triton/cache/ok'), info], DIRS)
    assert problem in found
