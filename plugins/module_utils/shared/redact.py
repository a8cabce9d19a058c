# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Redaction of credentials in what the probe returns, caches and sets as facts (pure).

Two ways a credential is recognised:

* by name: an environment variable, a command-line flag or a mapping key whose name says it holds a
  secret (``token``, ``key``, ``secret``, ``password``, ``credential``, ``auth`` ...); its value is
  replaced;
* by shape: a value that looks like a credential wherever it appears (hub and cloud tokens, bearer
  headers, JSON web tokens, private key blocks, passwords in URLs, ``name=value`` / ``'name': 'value'``
  pairs with a secret name inside free text such as a log line).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

REDACTED = "<redacted>"

# A name (environment variable, flag without dashes, mapping key) that holds a credential.
SECRET_NAME_RE = re.compile(
    r"(?i)(?:^|[_.-])(?:token|api[_-]?key|apikey|key|secret|secrets|password|passwd|passphrase|pwd"
    r"|credentials?|auth|authorization|cookie|session|private[_-]?key|access[_-]?key|signature)(?:$|[_.-])"
    r"|^(?:hf_token|hugging_face_hub_token|aws_secret_access_key|aws_session_token)$"
)
# Names that match the words above but are known to hold no credential.
NOT_SECRET_NAMES = frozenset((
    "KEY_LAYOUT", "VLLM_KV_CACHE_LAYOUT", "ssl_cert_reqs", "--ssl-cert-reqs", "--tokenizer",
    "--tokenizer-mode", "--skip-tokenizer-init", "--max-num-batched-tokens",
))

# Values that look like credentials, wherever they appear.
SHAPE_RES = (
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),                                  # hub tokens
    re.compile(r"\b(?:sk|pk|rk)-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"),       # API keys
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),                         # cloud access key ids
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),                           # forge tokens
    re.compile(r"\bglpat-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),                          # chat tokens
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),  # JSON web tokens
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S),
)
# "Bearer <x>", "Basic <x>"
AUTH_HEADER_RE = re.compile(r"(?i)\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}")
# scheme://user:password@host
URL_PASSWORD_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@'\"]+):[^@\s/'\"]+@")
# NAME=value, --name=value, --name value, 'name': 'value', "name": "value", name: value in free text
PAIR_RE = re.compile(
    r"""(?P<pre>(?P<q>['"]?)(?P<name>-{0,2}[A-Za-z_][A-Za-z0-9_.-]*)(?P=q)\s*(?P<sep>[:=]|\s(?=\S))\s*)"""
    r"""(?P<val>'[^']*'|"[^"]*"|\[[^\]]*\]|[^\s,;}'"\]\)]+)"""
)


def is_secret_name(name):
    """True when ``name`` (an environment variable, a flag with or without its dashes, a key) says it
    holds a credential."""
    name = str(name or "")
    if name in NOT_SECRET_NAMES:
        return False
    bare = name.lstrip("-")
    if bare in NOT_SECRET_NAMES or ("--" + bare) in NOT_SECRET_NAMES:
        return False
    return bool(SECRET_NAME_RE.search(bare))


def _pair(match):
    name = match.group("name")
    if not is_secret_name(name):
        return match.group(0)
    sep = match.group("sep")
    if sep.isspace() and not name.startswith("-"):
        return match.group(0)  # "word value" in prose: only --flag value pairs
    val = match.group("val")
    if val.startswith("["):
        return "%s[%s]" % (match.group("pre"), REDACTED)
    quote = val[0] if val[:1] in ("'", '"') else ""
    return "%s%s%s%s" % (match.group("pre"), quote, REDACTED, quote)


def redact_text(text):
    """``text`` with every credential recognised by shape, or by a secret name in a pair, replaced."""
    if not isinstance(text, str) or not text:
        return text
    for regex in SHAPE_RES:
        text = regex.sub(REDACTED, text)
    text = AUTH_HEADER_RE.sub(lambda m: "%s %s" % (m.group(1), REDACTED), text)
    text = URL_PASSWORD_RE.sub(lambda m: "%s:%s@" % (m.group(1), REDACTED), text)
    return PAIR_RE.sub(_pair, text)


def redact_args(args):
    """An argv list with the value of every secret-named flag (``--hf-token X``, ``--api-key=X``)
    replaced, and every element redacted by shape."""
    out, hide_next = [], False
    for arg in [str(a) for a in (args or [])]:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("-"):
            name, eq, _value = arg.partition("=")
            if is_secret_name(name):
                if eq:
                    out.append("%s=%s" % (name, REDACTED))
                else:
                    out.append(arg)
                    hide_next = True
                continue
        out.append(redact_text(arg))
    return out


def redact(value, key=None):
    """A deep copy of ``value`` (dicts, lists, strings) with credentials replaced: the value of a
    secret-named key, argv-like lists, and every string by shape."""
    if key is not None and is_secret_name(key) and isinstance(value, (str, int, float)) \
            and not isinstance(value, bool):
        return REDACTED
    if isinstance(value, dict):
        return dict((k, redact(v, key=k)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, str) for v in value) and any(v.startswith("-") for v in value):
            return redact_args(value)
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


# A secret value shorter than this is replaced only under its secret name (never inside other text).
MIN_SECRET_LEN = 6


def env_secrets(*mappings):
    """The values of environment mappings (``vllm_server_env``, ``lmcache_server_env`` as the plan holds them)
    that are credentials: by their variable's name, or by their shape (a token, a password in a URL ...)."""
    found = set()
    for mapping in mappings:
        for name, value in (mapping or {}).items():
            if isinstance(value, str) and value and (is_secret_name(name) or redact_text(value) != value):
                found.add(value)
    return found


def scrub(value, secrets):
    """``value`` (a JSON-like tree) with every occurrence of the strings ``secrets`` replaced by REDACTED."""
    if isinstance(value, dict):
        return dict((k, REDACTED if isinstance(v, str) and v in secrets and is_secret_name(k) else scrub(v, secrets))
                    for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [scrub(v, secrets) for v in value]
    if not isinstance(value, str):
        return value
    # a short value ("true", "1") is redacted only under its secret name (above): elsewhere it is not the secret
    for secret in sorted((s for s in secrets if len(s) >= MIN_SECRET_LEN), key=len, reverse=True):
        value = value.replace(secret, REDACTED)
    return value
