# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's programs, each resolved once: ``nvidia-smi``, ``journalctl``, ``systemctl`` and the
python of vLLM's venv. Commands run read-only through ``AnsibleModule.run_command``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil


def venv_python(vllm_executable):
    """The interpreter of the venv that holds vllm_executable, or None."""
    sibling = os.path.join(os.path.dirname(vllm_executable), "python")
    for candidate in (sibling, sibling + "3"):
        if os.access(candidate, os.X_OK):
            return candidate
    try:
        with open(vllm_executable, "rb") as f:
            first = f.readline().decode("utf-8", "replace").strip()
    except (IOError, OSError):
        return None
    if first.startswith("#!"):
        interp = first[2:].strip().split()
        if interp and os.access(interp[0], os.X_OK) and not interp[0].endswith("/env"):
            return interp[0]
    return None


def executable(path):
    """``path`` when it names an executable (a bare name is looked up on PATH), else None."""
    if os.path.sep in path:
        return path if os.access(path, os.X_OK) else None
    return shutil.which(path)


class Host(object):
    """The module's view of the host: each program resolved on first use and remembered."""

    def __init__(self, module, nvidia_smi="nvidia-smi"):
        self.module = module
        self.nvidia_smi_name = nvidia_smi
        self._paths = {}

    def path(self, name):
        """The absolute path of program ``name`` (a path is kept as given), or None when it is missing."""
        if name not in self._paths:
            self._paths[name] = name if os.path.sep in name else self.module.get_bin_path(name)
        return self._paths[name]

    @property
    def nvidia_smi(self):
        return self.path(self.nvidia_smi_name) or self.nvidia_smi_name

    def run(self, argv):
        """(rc, out, err) of ``argv``; OSError when its program is not on the host."""
        return self.module.run_command(self.argv(argv), handle_exceptions=False)

    def argv(self, argv):
        """``argv`` with its program resolved; OSError when it is not on the host."""
        exe = self.path(argv[0])
        if not exe:
            raise OSError("%s not found on the host" % argv[0])
        return [exe] + list(argv[1:])

    def run_gpu_query(self, argv):
        """``run_command`` as hardware.gpu_inventory / compute_apps call it."""
        return self.module.run_command(argv)
