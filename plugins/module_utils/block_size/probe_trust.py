# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Opening the probe's cache and lock files as root without being fooled.

A file is opened without following a symlink (``O_NOFOLLOW``), in a directory chain that has no
symlink and that nobody but root or the service user can change, and it is trusted only when it is a
regular file with one link, owned by root or the service user, and not writable by group or other.
Anything else raises :class:`UntrustedPath` with a sentence naming the path, what is wrong and the
fix; nothing is truncated, written or overwritten before these checks pass.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat


class UntrustedPath(Exception):
    """A cache or lock path the probe refuses to read or write as root."""


def trusted_uids(service_uid=None):
    """root, the module's own user and the service user."""
    return sorted(set(u for u in (0, os.geteuid(), service_uid) if u is not None))


def _owner(uid):
    try:
        import pwd
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except (KeyError, ImportError):
        return "uid %d" % uid


def check_dir_chain(directory, uids):
    """Every directory from / to ``directory`` (which must exist) is a real directory, not a
    symlink, owned by one of ``uids`` and not writable by group/other (a root-owned sticky directory
    such as /tmp is allowed: nobody can replace what another user put in it)."""
    path = os.path.abspath(directory)
    parts = [p for p in path.split(os.sep) if p]
    current = os.sep
    for part in [""] + parts:
        current = os.path.join(current, part) if part else current
        st = os.lstat(current)
        if stat.S_ISLNK(st.st_mode):
            raise UntrustedPath("%s is a symlink; the probe does not follow symlinks to its cache. "
                                "Fix: point cache_path at a real directory" % current)
        if not stat.S_ISDIR(st.st_mode):
            raise UntrustedPath("%s is not a directory" % current)
        sticky_root = st.st_uid == 0 and st.st_mode & stat.S_ISVTX
        if st.st_uid not in uids and not sticky_root:
            raise UntrustedPath("directory %s is owned by %s, not by root or the service user. Fix: "
                                "chown root %s, or choose another cache_path" % (current, _owner(st.st_uid), current))
        if st.st_mode & 0o022 and not sticky_root:
            raise UntrustedPath("directory %s is writable by group/other (mode %04o). Fix: chmod go-w %s"
                                % (current, stat.S_IMODE(st.st_mode), current))


def check_file(path, st, uids):
    """A regular file with one link, owned by one of ``uids``, not writable by group/other."""
    if not stat.S_ISREG(st.st_mode):
        raise UntrustedPath("%s is not a regular file; refused, not overwritten. Fix: remove it" % path)
    if st.st_nlink != 1:
        raise UntrustedPath("%s has %d hard links; refused, not overwritten. Fix: remove it"
                            % (path, st.st_nlink))
    if st.st_uid not in uids:
        raise UntrustedPath("%s is owned by %s, not by root or the service user; refused, not "
                            "overwritten. Fix: remove it or chown root %s" % (path, _owner(st.st_uid), path))
    if st.st_mode & 0o022:
        raise UntrustedPath("%s is writable by group/other (mode %04o); refused, not overwritten. "
                            "Fix: chmod go-w %s, or remove it" % (path, stat.S_IMODE(st.st_mode), path))


def make_dirs(directory, uids):
    """Create the missing directories (0755) below the last existing one, after checking it."""
    directory = os.path.abspath(directory)
    missing = []
    while not os.path.lexists(directory):
        missing.append(directory)
        directory = os.path.dirname(directory)
    check_dir_chain(directory, uids)
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o755)
        except OSError as e:
            if e.errno != errno.EEXIST:
                raise
        check_dir_chain(d, uids)


def open_trusted(path, flags, uids, mode=0o600, create_dirs=False):
    """os.open of ``path`` without following a symlink, in a trusted directory chain, checked with
    fstat after opening. Returns the fd, or None when the file does not exist and ``flags`` has no
    O_CREAT. Raises UntrustedPath (the fd is closed)."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if create_dirs:
        make_dirs(parent, uids)
    elif os.path.lexists(parent):
        check_dir_chain(parent, uids)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UntrustedPath("%s is a symlink; refused, not followed or overwritten. Fix: remove it"
                                % path)
        if e.errno == errno.ENOENT and not flags & os.O_CREAT:
            return None
        raise
    try:
        check_file(path, os.fstat(fd), uids)
    except UntrustedPath:
        os.close(fd)
        raise
    return fd


def read_trusted_text(path, uids=None, limit=4 * 1024 * 1024):
    """The text of ``path`` opened as :func:`open_trusted` opens it (root, the module's user and ``uids``
    trusted), or None when it does not exist. Raises UntrustedPath (a link, a file others may write, a
    directory on the way others may change) and OSError."""
    fd = open_trusted(path, os.O_RDONLY, uids or trusted_uids())
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(limit + 1)
    if len(raw) > limit:
        raise UntrustedPath("%s is larger than %d bytes" % (path, limit))
    return raw.decode("utf-8", "replace")
