# -*- coding: utf-8 -*-
# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fetch a hub model into the service's Hugging Face cache before the first start.

Run by the vllm_server role with the service's venv python, as the service's user, with the
service's environment (HF_HOME, HF_TOKEN, proxies, HF_HUB_OFFLINE):

    python fleet_prefetch.py <repo id> <revision or ""> <margin GiB>

Prints one JSON object: {"changed", "repo", "revision", "download_bytes", "free_bytes", "files",
"offline"}; on a problem {"failed": true, "msg": "..."} and exit status 2. Nothing is downloaded
when the disk of HF_HOME has less free space than what is missing plus the margin.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

GIB = 1024 ** 3
# What vLLM reads of a model: weights, configuration and tokenizer (no other checkpoint formats).
ALLOW_PATTERNS = ['*.json', '*.safetensors', '*.model', '*.tiktoken', '*.txt', '*.py', '*.jinja']


def missing_bytes(files):
    """Bytes still to download from dry-run entries ({'size', 'cached'}); unknown sizes count as 0."""
    return sum(int(f.get('size') or 0) for f in files if not f.get('cached'))


def disk_check(needed, free, margin_bytes):
    """None when ``free`` holds ``needed`` plus the margin, else the sentence saying it does not."""
    if needed + margin_bytes <= free:
        return None
    return ('the model needs %.1f GiB more (plus a margin of %.1f GiB) but the disk of HF_HOME has %.1f GiB free'
            % (needed / GIB, margin_bytes / GIB, free / GIB))


def existing_dir(path):
    """The nearest existing directory at or above ``path`` (HF_HOME may not exist yet)."""
    path = os.path.abspath(path)
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def dry_run(hub, repo, revision):
    """[{'name', 'size', 'cached'}] of the files a download would fetch (huggingface_hub's dry run,
    else the model's file list with sizes, nothing counted as cached)."""
    try:
        entries = hub.snapshot_download(repo, revision=revision, allow_patterns=ALLOW_PATTERNS, dry_run=True)
        return [{'name': e.filename, 'size': e.file_size, 'cached': bool(e.is_cached)} for e in entries]
    except TypeError:  # a huggingface_hub without dry_run
        info = hub.HfApi().model_info(repo, revision=revision, files_metadata=True)
        import fnmatch
        return [{'name': s.rfilename, 'size': getattr(s, 'size', None), 'cached': False}
                for s in info.siblings or [] if any(fnmatch.fnmatch(s.rfilename, p) for p in ALLOW_PATTERNS)]


def prefetch(hub, repo, revision, margin_gib, hf_home, offline):
    """The work of main(), with the huggingface_hub module given (a test double in the unit tests)."""
    result = {'changed': False, 'repo': repo, 'revision': revision, 'offline': offline}
    if offline:
        try:
            hub.snapshot_download(repo, revision=revision, allow_patterns=ALLOW_PATTERNS, local_files_only=True)
        except Exception as exc:  # the hub's own error names what is missing
            return dict(result, failed=True, msg='the host is offline (HF_HUB_OFFLINE=1) and %s is not complete in %s: %s'
                        % (repo, hf_home, exc))
        return result
    files = dry_run(hub, repo, revision)
    needed = missing_bytes(files)
    free = shutil.disk_usage(existing_dir(hf_home)).free
    result.update(download_bytes=needed, free_bytes=free, files=len(files))
    problem = disk_check(needed, free, int(float(margin_gib) * GIB))
    if problem:
        return dict(result, failed=True, msg='%s: %s; free space there or set vllm_server_hf_home to a larger disk'
                    % (repo, problem))
    if needed == 0 and all(f.get('cached') for f in files):
        return result
    hub.snapshot_download(repo, revision=revision, allow_patterns=ALLOW_PATTERNS)
    result['changed'] = True
    return result


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    repo, revision, margin = argv[0], argv[1] or None, argv[2]
    hf_home = os.environ.get('HF_HOME') or os.path.expanduser('~/.cache/huggingface')
    offline = os.environ.get('HF_HUB_OFFLINE', '').strip().lower() in ('1', 'true', 'yes', 'on')
    try:
        import huggingface_hub as hub
    except ImportError as exc:
        result = {'failed': True, 'msg': 'huggingface_hub is not in the vLLM venv: %s' % exc}
    else:
        try:
            result = prefetch(hub, repo, revision, margin, hf_home, offline)
        except Exception as exc:  # network, authentication, unknown repo: say it in the result
            result = {'failed': True, 'msg': 'cannot fetch %s: %s: %s' % (repo, type(exc).__name__, exc)}
    print(json.dumps(result))
    return 2 if result.get('failed') else 0


if __name__ == '__main__':
    sys.exit(main())
