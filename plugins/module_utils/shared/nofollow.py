# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Root in a directory a service user can write: every component opened without following a link.

The one rule of every place where root reads, writes or deletes below a service user's HOME (the compile
caches of the warm first start, the caches ``remove.yml`` deletes): each path component is opened with
``O_NOFOLLOW`` relative to its parent's descriptor, from ``/`` down (no path is ever resolved by the kernel
as a whole), so a link planted anywhere on the way is refused, never followed; nothing but regular files and
directories is ever created; nothing leaves the directory (no ``..``, no absolute member, no link).

``open_dir(path)``                 the descriptor of a directory, or :class:`Refused`
``remove_path(path)``              delete a file or a tree (a link inside it is removed, never followed)
``check_path(path)``               refuse, without changing anything, what ``remove_path`` would refuse
``pack(home, relative_dirs, fileobj, uid)``
                                   a gzip tarball of the directories below HOME: directories and regular files
                                   owned by ``uid`` only (links, special files, others' files are named, skipped)
``member_problems(members, relative_dirs)`` / ``unpack(archive, home, relative_dirs, uid, gid)``
                                   refuse a tarball with anything but regular files and directories below the
                                   cache directories; write it owned by the service user, with no link followed
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import posixpath
import stat
import tarfile

_CLOEXEC = getattr(os, 'O_CLOEXEC', 0)
DIR_FLAGS = os.O_RDONLY | getattr(os, 'O_DIRECTORY', 0) | os.O_NOFOLLOW | _CLOEXEC
MAX_DEPTH = 64


class Refused(Exception):
    """A path root will not follow (a link, a non-directory on the way, a member leaving the directory)."""


def _parts(path):
    if not path.startswith('/'):
        raise Refused('%s is not an absolute path' % path)
    parts = [p for p in path.split('/') if p]
    if any(p in ('.', '..') for p in parts):
        raise Refused('%s holds "." or ".." segments' % path)
    return parts


def open_child_dir(dir_fd, name, where):
    """The descriptor of the directory ``name`` in ``dir_fd``; Refused when it is a link or not a directory."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused('%s is a symbolic link or not a directory; root never follows it' % where)
        raise


def _descend(start_fd, parts, where, missing_ok=False):
    """The descriptor of the directory reached from ``start_fd`` (left open) through ``parts``, each component
    opened with O_NOFOLLOW; None when ``missing_ok`` and a component is absent."""
    fd = os.dup(start_fd)
    try:
        for part in parts:
            where = '%s/%s' % (where, part)
            try:
                child = open_child_dir(fd, part, where)
            except OSError as exc:
                if missing_ok and exc.errno == errno.ENOENT:
                    os.close(fd)
                    return None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_dir(path):
    """The descriptor of the directory ``path``, each component opened with O_NOFOLLOW from /."""
    root = os.open('/', DIR_FLAGS)
    try:
        return _descend(root, _parts(path), '')
    finally:
        os.close(root)


def lstat_at(dir_fd, name):
    return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


def _remove_at(dir_fd, name, where, depth=0):
    if depth > MAX_DEPTH:
        raise Refused('%s is nested deeper than %d directories' % (where, MAX_DEPTH))
    if not stat.S_ISDIR(lstat_at(dir_fd, name).st_mode):
        os.unlink(name, dir_fd=dir_fd)  # a file, or a link itself (never what it points to)
        return
    fd = open_child_dir(dir_fd, name, where)
    try:
        for child in os.listdir(fd):
            _remove_at(fd, child, '%s/%s' % (where, child), depth + 1)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def remove_path(path):
    """Delete ``path`` (a file or a tree) without following a link on the way or inside; False when absent."""
    parent = open_dir(posixpath.dirname(path))
    try:
        try:
            lstat_at(parent, posixpath.basename(path))
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return False
            raise
        _remove_at(parent, posixpath.basename(path), path)
        return True
    finally:
        os.close(parent)


def check_path(path):
    """Refused when a component of ``path``'s directory is a link or not a directory (what check mode says)."""
    try:
        os.close(open_dir(posixpath.dirname(path)))
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise


def rmdir_if_empty(path):
    """Remove the directory ``path`` when it is empty (never through a link); whether it went."""
    parent = open_dir(posixpath.dirname(path))
    try:
        fd = open_child_dir(parent, posixpath.basename(path), path)
        try:
            if os.listdir(fd):
                return False
        finally:
            os.close(fd)
        os.rmdir(posixpath.basename(path), dir_fd=parent)
        return True
    finally:
        os.close(parent)


# --------------------------------------------------------------------------- pack


def _walk_to(home_fd, relative, home):
    """The descriptor of HOME/relative, or None when a component is absent."""
    return _descend(home_fd, relative.split('/'), home, missing_ok=True)


def _info(name, st, kind):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = stat.S_IMODE(st.st_mode) & 0o755
    info.mtime = int(st.st_mtime)
    info.size = st.st_size if kind == tarfile.REGTYPE else 0
    return info


def _add_file(tar, dir_fd, name, arcname, uid, skipped):
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd, 'rb') as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid or st.st_nlink != 1:
            skipped.append(arcname)
            return
        tar.addfile(_info(arcname, st, tarfile.REGTYPE), handle)


def _add_tree(tar, dir_fd, arcname, uid, skipped, depth=0):
    st = os.fstat(dir_fd)
    if st.st_uid != uid or depth > MAX_DEPTH:
        skipped.append(arcname)
        return
    tar.addfile(_info(arcname, st, tarfile.DIRTYPE))
    for name in sorted(os.listdir(dir_fd)):
        child, mode = '%s/%s' % (arcname, name), lstat_at(dir_fd, name).st_mode
        if stat.S_ISDIR(mode):
            fd = open_child_dir(dir_fd, name, child)
            try:
                _add_tree(tar, fd, child, uid, skipped, depth + 1)
            finally:
                os.close(fd)
        elif stat.S_ISREG(mode):
            _add_file(tar, dir_fd, name, child, uid, skipped)
        else:
            skipped.append(child)


def pack(home, relative_dirs, fileobj, uid):
    """Write the gzip tarball of HOME's cache directories into ``fileobj``: ([packed dirs], [skipped paths]).

    Only directories and regular files owned by ``uid`` (the service user) with one link travel; a link, a
    special file or another owner's file is skipped and named (relative to HOME)."""
    packed, skipped = [], []
    home_fd = open_dir(home)
    try:
        with tarfile.open(fileobj=fileobj, mode='w:gz', format=tarfile.PAX_FORMAT) as tar:
            for relative in relative_dirs:
                try:
                    fd = _walk_to(home_fd, relative, home)
                except Refused:
                    skipped.append(relative)
                    continue
                if fd is None:
                    continue
                try:
                    _add_tree(tar, fd, relative, uid, skipped)
                    packed.append(relative)
                finally:
                    os.close(fd)
    finally:
        os.close(home_fd)
    return packed, skipped


# --------------------------------------------------------------------------- unpack


def _below(name, relative_dirs):
    return any(name == d or name.startswith(d + '/') for d in relative_dirs)


def member_problems(members, relative_dirs):
    """Why a tarball may not be unpacked below HOME (one sentence per member), or []."""
    problems = []
    for member in members:
        name = member.name
        parts = name.split('/')
        if name.startswith('/') or any(p in ('', '.', '..') for p in parts):
            problems.append('%s leaves the directory (an absolute path or "." / ".." segments)' % name)
        elif not _below(name, relative_dirs):
            problems.append('%s is not below the compile caches (%s)' % (name, ', '.join(relative_dirs)))
        elif not (member.isreg() or member.isdir()):
            problems.append('%s is not a regular file or a directory (tar type %r); none is created'
                            % (name, member.type.decode('ascii', 'replace')))
    return problems


def _make_dir(parent_fd, name, where, uid, gid):
    try:
        os.mkdir(name, 0o700, dir_fd=parent_fd)
        created = True
    except OSError as exc:
        if exc.errno != errno.EEXIST:
            raise
        created = False
    fd = open_child_dir(parent_fd, name, where)
    if created:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, 0o755)
    return fd


def _dir_of(home_fd, home, parts, uid, gid):
    fd = os.dup(home_fd)
    where = home
    try:
        for part in parts:
            where = '%s/%s' % (where, part)
            child = _make_dir(fd, part, where, uid, gid)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_file(tar, member, parent_fd, name, where, uid, gid):
    try:
        mode = lstat_at(parent_fd, name).st_mode
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise Refused('%s is a directory on the host, the tarball holds a file' % where)
    if mode is not None:
        os.unlink(name, dir_fd=parent_fd)  # the old file, or a planted link itself
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600, dir_fd=parent_fd)
    with os.fdopen(fd, 'wb') as out:
        os.fchown(fd, uid, gid)
        source = tar.extractfile(member)
        while True:
            chunk = source.read(1 << 20)
            if not chunk:
                break
            out.write(chunk)
        os.fchmod(fd, member.mode & 0o755)


def unpack(archive, home, relative_dirs, uid, gid):
    """Unpack the tarball ``archive`` (a path root alone can write) below HOME, owned by uid:gid.

    Refuses the whole tarball (Refused, nothing written) when a member is not a regular file or a directory
    below the cache directories; refuses a link met on the host (never followed). Returns the member count."""
    with tarfile.open(archive, mode='r:gz') as tar:
        members = tar.getmembers()
        problems = member_problems(members, relative_dirs)
        if problems:
            raise Refused('; '.join(problems))
        home_fd = open_dir(home)
        try:
            for member in members:
                parts = member.name.split('/')
                parent = _dir_of(home_fd, home, parts[:-1], uid, gid)
                try:
                    where = '%s/%s' % (home, member.name)
                    if member.isdir():
                        os.close(_make_dir(parent, parts[-1], where, uid, gid))
                    else:
                        _write_file(tar, member, parent, parts[-1], where, uid, gid)
                finally:
                    os.close(parent)
        finally:
            os.close(home_fd)
    return len(members)
