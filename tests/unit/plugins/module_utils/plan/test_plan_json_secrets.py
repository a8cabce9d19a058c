# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The public plan (plan.json, mode 0644, and the reports) holds no credential of vllm_server_env or
lmcache_server_env: a value under a secret name or of a credential's shape is redacted wherever it appears (the
environment file, the probe's environment ...), other values stay."""

from __future__ import annotations

import json

from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.plan import host_plan
from ansible_collections.lmcache_vllm.fleet.plugins.module_utils.shared import redact

ENV = {'MY_DB_PASSWORD': 'hunter2-db-secret', 'WANDB_API_KEY': 'wandbkeyvalue123', 'S3_URL': 's3://u:pw-in-url@host/x',
       'SHORT_TOKEN': 'abc', 'USE_AUTH': 'true', 'PLAIN_SETTING': 'plainvalue'}


def public():
    plan = host_plan.plan_host('gpu-07', {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_env': ENV,
                                          'lmcache_server_env': {'LM_TOKEN': 'lmtokenvalue99'}}, n=544, n_kind='probed')
    return plan, host_plan.public_view(plan)


def test_plan_json_holds_no_credential_of_the_service_environments():
    plan, out = public()
    text = json.dumps(out)
    for secret in ('hunter2-db-secret', 'wandbkeyvalue123', 'pw-in-url', 'lmtokenvalue99'):
        assert secret in json.dumps(plan, default=str), 'the plan itself holds it (the 0600 environment file)'
        assert secret not in text, secret
    assert out['vllm']['probe_env']['SHORT_TOKEN'] == redact.REDACTED
    assert out['vllm']['probe_env']['USE_AUTH'] == redact.REDACTED
    assert out['vllm']['probe_env']['PLAIN_SETTING'] == 'plainvalue'
    assert 'true' in text.replace('"USE_AUTH": "<redacted>"', ''), 'a short value elsewhere is not the secret'


def test_the_probes_arguments_carry_the_environment_files_secrets_and_the_public_plan_none():
    settings = {'vllm_server_model': 'Qwen/Qwen3.5-0.8B', 'vllm_server_hf_token': 'hf_tokenvalue0123456789',
                'vllm_server_api_key': 'api-key-value-0123456789'}
    plan = host_plan.plan_host('gpu-07', settings, n=544, n_kind='probed')
    assert plan['probe']['env']['HF_TOKEN'] == 'hf_tokenvalue0123456789'  # the probe runs as the service runs
    assert plan['probe']['env']['VLLM_API_KEY'] == 'api-key-value-0123456789'
    text = json.dumps(host_plan.public_view(plan))
    assert 'hf_tokenvalue0123456789' not in text and 'api-key-value-0123456789' not in text
