# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe's one exception family. ``run_module`` turns any of them into its single failure path:
``fail_json`` with the message, the result so far and ``result`` (``outcome`` defaults to ``error``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ProbeFailed(Exception):
    """The module fails with ``msg``; ``result`` holds the extra return values (``outcome`` among them)."""

    def __init__(self, msg, **result):
        super(ProbeFailed, self).__init__(msg)
        self.msg = msg
        self.result = result


class ProbeInterrupted(ProbeFailed):
    """The probe received SIGTERM / SIGINT / SIGHUP (its processes are killed on the way out)."""

    def __init__(self, signum):
        super(ProbeInterrupted, self).__init__(
            "probe interrupted by signal %d; vLLM's process group was killed" % signum, outcome="error")
        self.signum = signum


class CacheLockTimeout(ProbeFailed):
    """Another probe on this host holds the cache lock longer than ``lock_timeout``."""


class CacheFileError(ProbeFailed):
    """The cache file exists but cannot be read as a cache (not JSON, not a mapping)."""
