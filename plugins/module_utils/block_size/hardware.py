# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hardware a vLLM service runs on: GPUs from ``nvidia-smi``, the CPU from ``/proc/cpuinfo``.

vLLM's block size N depends on the hardware: on CUDA the attention backend (and so the kernel block
size) follows the GPU architecture, on CPU the attention ISA follows the processor's flags. A cached N
is valid only on the hardware it was read on, so :func:`hardware_identity` goes into the probe's
fingerprint.

API (everything but the ``read_*`` / ``*_inventory`` / ``compute_apps`` helpers is pure):

``gpu_inventory(run_command, nvidia_smi='nvidia-smi', fields=GPU_QUERY_FIELDS)``
    The collection's one reader of ``nvidia-smi --query-gpu``: runs ``nvidia-smi --query-gpu=<fields>
    --format=csv,noheader,nounits`` through ``run_command(argv) -> (rc, stdout, stderr)`` (the
    signature of ``AnsibleModule.run_command``; :func:`subprocess_runner` gives one for plain Python)
    and returns a list of dicts, one per GPU, in nvidia-smi's order. With the default fields (the
    probe's)::

        {'index': 0, 'name': 'NVIDIA H200', 'uuid': 'GPU-0a1b...', 'memory_total_mib': 143771,
         'memory_used_mib': 0, 'driver_version': '580.159.04', 'compute_cap': '9.0'}

    ``GPU_REPORT_FIELDS`` (the ``gpu_facts`` module) adds ``memory_free_mib``, ``utilization_pct``
    and ``pci_bus_id``. A driver that does not know a field refuses the whole query: it is asked
    again with ``GPU_QUERY_FIELDS``, then without ``compute_cap`` (a driver from before 2021); the
    missing values are None. Numbers are ints or None (``[N/A]``); ``compute_cap`` is a string such
    as ``'9.0'`` or None. Raises :class:`GpuQueryError` (its message quotes nvidia-smi's own words,
    e.g. a driver that cannot be reached) when nvidia-smi is missing, exits non-zero or prints
    something unparsable; it carries ``argv``, ``rc`` (None when nvidia-smi could not be run),
    ``stdout``, ``stderr``.

``parse_gpu_inventory(text, fields=GPU_QUERY_FIELDS)``
    The parser behind :func:`gpu_inventory` (pure; raises ``ValueError``).

``compute_apps(run_command, nvidia_smi='nvidia-smi')`` / ``parse_compute_apps(text)``
    ``nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits``: a list of
    ``{'pid': int, 'used_memory_mib': int or None}``.

``visible_gpus(gpus, cuda_visible_devices)``
    The GPUs of :func:`gpu_inventory` a process sees under ``CUDA_VISIBLE_DEVICES`` (indexes, ``GPU-``
    UUIDs or unique UUID prefixes, comma separated; vLLM's own rule: the list stops at the first entry
    that matches no GPU). ``None`` means all GPUs; ``''`` none.

``cuda_architecture(compute_cap)``
    ``'9.0'`` -> ``'sm90'``. ``ARCHITECTURE_ALIASES`` maps the family names (``hopper``, ``ampere``,
    ...) to the same ``smXY`` form; :func:`normalize_architecture` accepts either, and
    :func:`architecture_from_gpu_name` maps GPU names (``NVIDIA H200`` -> ``sm90``).

``parse_cpuinfo(text, machine=None)`` / ``read_cpuinfo(path='/proc/cpuinfo')``
    ``{'machine', 'model', 'vendor', 'isa'}``: the CPU model name and the ISA flags that vLLM's CPU
    backend branches on (:data:`CPU_ISA_FLAGS`), sorted.

``hardware_identity(platform, gpus=None, cpu=None)``
    The canonical dict that enters the fingerprint: for ``cuda`` the GPUs the service uses (index,
    uuid, name, compute capability and architecture, memory size; not the used memory) and the
    driver version, so that a swapped GPU or a disk image cloned to another machine misses the
    cache; for ``cpu`` the machine, the CPU model and ISA flags.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import platform as _platform_mod
import re
import subprocess

# vLLM's platforms: (default block size, kernel block minimum); before vLLM 0.20 every N aligned to 16. The
# prediction and the log reader's check of a reported N read them here (host modules ship this file anyway).
PLATFORMS = {
    'cuda': (16, 16),
    'cpu': (128, 32),
}
LEGACY_ALIGNMENT = 16

# The probe's query (what the fingerprint needs) and the gpu_facts module's (a report of the GPUs).
GPU_QUERY_FIELDS = ("index", "name", "uuid", "memory.total", "memory.used", "driver_version",
                    "compute_cap")
GPU_REPORT_FIELDS = ("index", "name", "uuid", "memory.total", "memory.used", "memory.free", "utilization.gpu",
                     "driver_version", "compute_cap", "pci.bus_id")
# nvidia-smi field -> key of the GPU dict; the numeric ones are read as ints.
GPU_FIELD_KEYS = {
    "index": "index", "name": "name", "uuid": "uuid", "memory.total": "memory_total_mib",
    "memory.used": "memory_used_mib", "memory.free": "memory_free_mib", "utilization.gpu": "utilization_pct",
    "driver_version": "driver_version", "compute_cap": "compute_cap", "pci.bus_id": "pci_bus_id",
}
NUMERIC_FIELDS = ("memory.total", "memory.used", "memory.free", "utilization.gpu")
APPS_QUERY_ARGS = ["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]

# ISA flags of /proc/cpuinfo that vLLM's CPU backend (its kernels, the attention ISA it picks,
# bf16 / fp16 support) branches on. Only these enter the fingerprint: a microcode update that
# adds an unrelated flag does not invalidate the cache.
CPU_ISA_FLAGS = (
    # x86
    "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512dq",
    "avx512cd", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx512vbmi", "amx_bf16",
    "amx_tile", "amx_int8", "amx_fp16",
    # aarch64 ("Features" line)
    "asimd", "asimdhp", "asimddp", "bf16", "i8mm", "sve", "sve2", "svebf16", "svei8mm", "sme",
    # ppc64le / s390x
    "vsx", "altivec", "arch_3_00", "arch_3_1", "mma", "vxe", "vxe2",
)

# GPU family names accepted wherever an architecture is asked for, as smXY.
ARCHITECTURE_ALIASES = {
    "volta": "sm70", "turing": "sm75", "ampere": "sm80", "ada": "sm89", "lovelace": "sm89",
    "hopper": "sm90", "blackwell": "sm100",
}

# NVIDIA GPU names (as nvidia-smi prints them, or short) -> architecture; first match wins.
GPU_NAME_ARCHITECTURES = (
    (r"\bGH200\b|\bH(100|200|800|20)\b", "sm90"),
    (r"\bGB?300\b|\bB300\b", "sm103"),
    (r"\bGB200\b|\bB(100|200)\b", "sm100"),
    (r"\bRTX (PRO )?(50\d0|6000 Blackwell)|\bRTX PRO 6000\b", "sm120"),
    (r"\bL(4|40|40S|20)\b|\bRTX (40\d0|6000 Ada)\b", "sm89"),
    (r"\bA100\b|\bA800\b|\bA30\b", "sm80"),
    (r"\bA(10|10G|40|16|2)\b|\bRTX (30\d0|A\d+)\b", "sm86"),
    (r"\bT4\b|\bRTX 20\d0\b", "sm75"),
    (r"\bV100\b", "sm70"),
)

NA_VALUES = ("", "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]",
             "[insufficient permissions]")
_NOT_VALID_FIELD_RE = re.compile(r"not a valid field to query", re.I)


class GpuQueryError(Exception):
    """nvidia-smi could not tell the GPUs (missing, failed, or printed something unparsable)."""

    def __init__(self, msg, argv=None, rc=None, stdout="", stderr=""):
        super(GpuQueryError, self).__init__(msg)
        self.msg = msg
        self.argv = argv
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr


def subprocess_runner(timeout=60):
    """A ``run_command(argv) -> (rc, stdout, stderr)`` for plain Python (tests, scripts).
    A missing executable gives rc 127 with the OSError text as stderr."""
    def run(argv):
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
        except OSError as e:
            return 127, "", str(e)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            return 124, out.decode("utf-8", "replace"), "timed out after %s s" % timeout
        return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    return run


def _na(value):
    return value.strip().lower() in NA_VALUES


def _int_or_none(value, what, line):
    value = value.strip()
    if _na(value):
        return None
    try:
        return int(float(value))
    except ValueError:
        raise ValueError("nvidia-smi %s %r is not a number in line %r" % (what, value, line))


def _rows(text):
    for raw in (text or "").splitlines():
        line = raw.strip()
        if line:
            yield line, [cell.strip() for cell in line.split(",")]


def gpu_query_args(fields=GPU_QUERY_FIELDS):
    """The arguments of nvidia-smi that ask ``fields`` of every GPU."""
    return ["--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


def _gpu_cell(field, value, line):
    if field == "index":
        if not value.isdigit():
            raise ValueError("nvidia-smi GPU index %r is not a number in line %r" % (value, line))
        return int(value)
    if field == "name":
        return value
    if _na(value):
        return None
    if field in NUMERIC_FIELDS:
        return _int_or_none(value, field, line)
    if field == "compute_cap" and not re.match(r"^\d+\.\d+$", value):
        raise ValueError("nvidia-smi compute capability %r is not N.M in line %r" % (value, line))
    return value


def parse_gpu_inventory(text, fields=GPU_QUERY_FIELDS):
    """GPU dicts from the CSV of ``--query-gpu=<fields> --format=csv,noheader,nounits``.

    The GPU name may itself hold commas in theory; the row is split from both ends (the fields
    before ``name`` first, those after it last). Raises ValueError for a row that does not fit."""
    fields = tuple(fields)
    at = fields.index("name") if "name" in fields else None
    gpus = []
    for line, cells in _rows(text):
        if len(cells) < len(fields) or (at is None and len(cells) != len(fields)):
            raise ValueError("nvidia-smi printed %r, not the %d fields %s" % (line, len(fields), ",".join(fields)))
        values = cells
        if at is not None:
            end = len(cells) - (len(fields) - at - 1)
            values = cells[:at] + [", ".join(cells[at:end])] + cells[end:]
        gpus.append(dict((GPU_FIELD_KEYS[f], _gpu_cell(f, v, line)) for f, v in zip(fields, values)))
    return gpus


def parse_compute_apps(text):
    """``[{'pid': int, 'used_memory_mib': int or None}]`` from ``--query-compute-apps=pid,used_memory``.
    nvidia-smi prints nothing (or a "No running processes found" line) when no process holds memory."""
    apps = []
    for line, cells in _rows(text):
        if line.lower().startswith("no running"):
            continue
        if len(cells) != 2 or not cells[0].isdigit():
            raise ValueError("nvidia-smi printed %r, not 'pid, used_memory'" % line)
        apps.append({"pid": int(cells[0]),
                     "used_memory_mib": _int_or_none(cells[1], "used_memory", line)})
    return apps


def _query(run_command, nvidia_smi, args, parser):
    argv = [nvidia_smi] + list(args)
    try:
        rc, out, err = run_command(argv)
    except (OSError, ValueError) as e:
        raise GpuQueryError("cannot run %s: %s" % (nvidia_smi, e), argv=argv)
    out = out or ""
    err = err or ""
    if rc != 0:
        said = (err.strip() or out.strip() or "no output").splitlines()
        raise GpuQueryError("%s exited with rc %s: %s" % (" ".join(argv), rc, " ".join(said[:3])),
                            argv=argv, rc=rc, stdout=out, stderr=err)
    try:
        return parser(out)
    except ValueError as e:
        raise GpuQueryError("%s printed what cannot be read: %s" % (" ".join(argv), e),
                            argv=argv, rc=rc, stdout=out, stderr=err)


def _fallbacks(fields):
    basic = tuple(f for f in GPU_QUERY_FIELDS if f != "compute_cap")
    out = []
    for attempt in (tuple(fields), GPU_QUERY_FIELDS, basic):
        if attempt not in out:
            out.append(attempt)
    return out


def gpu_inventory(run_command, nvidia_smi="nvidia-smi", fields=GPU_QUERY_FIELDS):
    """The host's GPUs as dicts (see the module docstring); raises GpuQueryError."""
    attempts = _fallbacks(fields)
    for number, attempt in enumerate(attempts, 1):
        try:
            gpus = _query(run_command, nvidia_smi, gpu_query_args(attempt),
                          lambda out, asked=attempt: parse_gpu_inventory(out, asked))
            break
        except GpuQueryError as e:
            if number == len(attempts) or not _NOT_VALID_FIELD_RE.search(e.stdout + e.stderr):
                raise
    for gpu in gpus:
        for field in fields:
            gpu.setdefault(GPU_FIELD_KEYS[field], None)
    return gpus


def compute_apps(run_command, nvidia_smi="nvidia-smi"):
    """The processes that hold GPU memory; raises GpuQueryError."""
    return _query(run_command, nvidia_smi, APPS_QUERY_ARGS, parse_compute_apps)


def visible_gpus(gpus, cuda_visible_devices=None):
    """The GPUs a process sees with ``CUDA_VISIBLE_DEVICES`` (None: all of them), in the order
    the variable names them."""
    if cuda_visible_devices is None:
        return list(gpus)
    out = []
    for entry in str(cuda_visible_devices).split(","):
        entry = entry.strip()
        if not entry:
            break
        match = None
        if entry.lstrip("-").isdigit():
            number = int(entry)
            match = [g for g in gpus if g["index"] == number]
        elif entry.upper().startswith(("GPU-", "MIG-")):
            match = [g for g in gpus if g.get("uuid") and g["uuid"].upper().startswith(entry.upper())]
        if not match or len(match) != 1:
            break  # CUDA stops at the first entry it cannot resolve
        if match[0] not in out:
            out.append(match[0])
    return out


def normalize_architecture(value):
    """'hopper' / 'sm90' / 'SM_90' / '9.0' / 'cpu' -> 'sm90' / 'cpu'. None for ''/None.
    Raises ValueError for anything else."""
    if value in (None, ""):
        return None
    text = str(value).strip().lower().replace("_", "")
    if text == "cpu":
        return "cpu"
    if text in ARCHITECTURE_ALIASES:
        return ARCHITECTURE_ALIASES[text]
    m = re.match(r"^sm(\d{2,3})[a-z]?$", text)
    if m:
        return "sm" + m.group(1)
    m = re.match(r"^(\d+)\.(\d+)$", text)
    if m:
        return cuda_architecture(text)
    raise ValueError("architecture %r is not known; use cpu, smXY (e.g. sm90), a compute capability "
                     "(e.g. 9.0) or one of %s" % (value, ", ".join(sorted(ARCHITECTURE_ALIASES))))


def architecture_from_gpu_name(name):
    """'NVIDIA H200' / 'h100' / 'A100-SXM4-80GB' -> 'sm90' / 'sm90' / 'sm80'; None when unknown."""
    text = str(name or "").upper().replace("-", " ")
    for pattern, arch in GPU_NAME_ARCHITECTURES:
        if re.search(pattern, text):
            return arch
    return None


def cuda_architecture(compute_cap):
    """'9.0' -> 'sm90', '10.0' -> 'sm100'; None for None."""
    if compute_cap in (None, ""):
        return None
    major, _dot, minor = str(compute_cap).strip().partition(".")
    return "sm%d%d" % (int(major), int(minor or 0))


def parse_cpuinfo(text, machine=None):
    """CPU model, vendor and the N-relevant ISA flags from /proc/cpuinfo text (pure).

    x86 lists ``flags``, aarch64 ``Features`` (and no model name: ``CPU implementer`` / ``CPU part``
    identify it), ppc64le ``cpu`` and s390x ``features``."""
    fields = {}
    for line in (text or "").splitlines():
        if ":" not in line:
            continue
        key, _sep, value = line.partition(":")
        key = key.strip().lower()
        if key and key not in fields:
            fields[key] = value.strip()
    flags = set()
    for key in ("flags", "features"):
        flags.update(fields.get(key, "").split())
    model = fields.get("model name") or fields.get("cpu") or fields.get("processor") or ""
    if not fields.get("model name") and fields.get("cpu implementer"):
        model = "implementer %s part %s" % (fields.get("cpu implementer"), fields.get("cpu part", "?"))
    vendor = fields.get("vendor_id") or fields.get("cpu implementer") or fields.get("vendor") or ""
    return {
        "machine": machine or "",
        "model": model,
        "vendor": vendor,
        "isa": sorted(f for f in flags if f in CPU_ISA_FLAGS),
    }


def read_cpuinfo(path="/proc/cpuinfo", machine=None):
    """:func:`parse_cpuinfo` of this host (machine from ``platform.machine()``)."""
    try:
        with open(path, "r") as f:
            text = f.read()
    except (IOError, OSError):
        text = ""
    return parse_cpuinfo(text, machine or _platform_mod.machine())


def gpu_summary(gpu):
    """The part of one GPU dict that identifies it for the fingerprint (not its used memory)."""
    return {
        "index": gpu.get("index"),
        "uuid": gpu.get("uuid"),
        "name": gpu.get("name"),
        "compute_cap": gpu.get("compute_cap"),
        "architecture": cuda_architecture(gpu.get("compute_cap")),
        "memory_total_mib": gpu.get("memory_total_mib"),
    }


def hardware_identity(platform, gpus=None, cpu=None):
    """The canonical hardware dict for the fingerprint (pure).

    ``platform`` cuda: ``gpus`` are the GPUs the service uses (:func:`visible_gpus`); the driver
    version is the first GPU's (one driver per host). Other platforms: ``cpu`` is a
    :func:`parse_cpuinfo` dict. A CUDA host's CPU is left out: it does not pick the GPU kernels."""
    if platform == "cuda":
        gpus = list(gpus or [])
        return {
            "kind": "cuda",
            "gpus": [gpu_summary(g) for g in gpus],
            "driver_version": gpus[0].get("driver_version") if gpus else None,
        }
    cpu = cpu or {}
    return {
        "kind": platform or "cpu",
        "machine": cpu.get("machine", ""),
        "cpu_model": cpu.get("model", ""),
        "isa": list(cpu.get("isa", [])),
    }


def cuda_visible_devices(env, base_env=None):
    """CUDA_VISIBLE_DEVICES of the probe: the module's env first, else the base environment
    (None when neither sets it)."""
    for source in (env or {}, base_env if base_env is not None else os.environ):
        if "CUDA_VISIBLE_DEVICES" in source:
            return str(source["CUDA_VISIBLE_DEVICES"])
    return None
