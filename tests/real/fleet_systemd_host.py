# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real systemd host for the tests that run the collection's roles and task files against systemd: a rootful
podman container of the test-host image (scripts/setup-testhosts.sh) with systemd as its first process, removed
when the test ends. Without podman or the image the test skips (fails in CI or with FLEET_REQUIRE_REAL=1)."""

from __future__ import absolute_import, division, print_function

import contextlib
import shutil
import subprocess
import time

from fleet_real_probe_helpers import skip_or_fail

IMAGE = 'localhost/lmcache-vllm-fleet-host:bookworm'
# podman's default limits are refused on some hosts (crun: setrlimit RLIMIT_NOFILE): these are accepted here
ULIMITS = ['--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=32768:32768']


def podman(*args, check=True):
    return subprocess.run(['podman'] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=check, timeout=300).stdout


def require_image(image=IMAGE):
    if not shutil.which('podman') or subprocess.run(['podman', 'image', 'exists', image], check=False).returncode:
        skip_or_fail('no podman or no image %s (scripts/setup-testhosts.sh)' % image)


@contextlib.contextmanager
def systemd_host(name, *run_args, image=IMAGE):
    """Start the container ``name`` (``run_args``: further ``podman run`` options, such as mounts), wait until
    systemd is up (at most 180 s), yield its name, and remove it."""
    podman(*(['run', '-d', '--name', name, '--hostname', name] + ULIMITS + ['--cap-add', 'SYS_ADMIN']
             + list(run_args) + [image, '/sbin/init']))
    try:
        deadline = time.time() + 180
        while podman('exec', name, 'systemctl', 'is-system-running', '--wait', check=False).strip() not in (
                'running', 'degraded') and time.time() < deadline:
            time.sleep(2)
        yield name
    finally:
        podman('rm', '-f', name, check=False)
