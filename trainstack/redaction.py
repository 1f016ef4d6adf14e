"""Redaction of what trainstack reads, not only of what it wrote: a saved plan given to ``diff`` may
be hand-made or come from an older trainstack, so it is redacted like a profile is scanned.

:func:`redact_input` returns a copy of a document in which, at any depth:

* the value of every secret-named key is replaced (``password``, ``HF_TOKEN``, ``wandb_key``, and a
  ``*_key`` whose value is a generated token), numbers included;
* a key that is itself credential-shaped is replaced by a placeholder;
* inside every string, each credential shape (trainstack.secrets.SHAPES, the 30-character AccessKey
  secret too), each secret-named option or assignment with a literal value (``--password X``,
  ``HF_TOKEN=...``) and each secret-named ``key=value`` / ``key: value`` pair of a config text
  (``password: hunter2`` in cloud-config, ``db-secret=...``) is replaced, so user data keeps its
  shape and loses the secret;
* a string that is base64 (cloud-init user data usually is; gzip inside it is opened, at most
  :data:`MAX_DECODED_BYTES`) holding any of the above is replaced whole: its text cannot be redacted
  in place, and printing it would print the secret to anyone who decodes it.

It is idempotent, and trainstack's own plan documents come out unchanged (they were redacted when
written), so a diff of a saved plan and a fresh one shows no change that redaction made.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import zlib
from typing import Any

from .secrets import REDACTED, _command_hits, _is_reference, _shape_hits, is_key_name, is_secret_name, token_like

#: decoded base64 (after gunzip) larger than this is not looked into, and is replaced whole
MAX_DECODED_BYTES = 16 << 20
_BASE64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_REDACTED_KEY = "***redacted key***"
#: ``key=value`` / ``key: value`` / ``"key": "value"`` inside a text (a config file, cloud-config):
#: wider than a shell assignment (``db-secret``, ``auth.token``); ``key:value`` needs the space YAML
#: needs, so a URL's scheme is never a key
_TEXT_PAIR = re.compile(r"(?:^|(?<=[\s;&|(`\"'{,]))([A-Za-z_][A-Za-z0-9_.-]*)[\"']?[ \t]*(?:=|:[ \t]+)[ \t]*"
                        r"[\"']?([^\s;&|)\"',}]+)")


def redact_input(doc: Any) -> Any:
    """A copy of ``doc`` with every credential it holds replaced (see the module docstring)."""
    if isinstance(doc, dict):
        out = {}
        for k, v in doc.items():
            key = k if not isinstance(k, str) or redact_string(k) == k else _unique(_REDACTED_KEY, out)
            out[key] = REDACTED if _secret_entry(k, v) else redact_input(v)
        return out
    if isinstance(doc, (list, tuple)):
        return [redact_input(v) for v in doc]
    if isinstance(doc, str):
        return redact_string(doc)
    return doc


def _unique(name: str, taken: dict) -> str:
    n, candidate = 1, name
    while candidate in taken:
        n += 1
        candidate = f"{name} {n}"
    return candidate


def _secret_entry(key: Any, value: Any) -> bool:
    if not isinstance(key, str) or isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return False
    kind = _key_kind(key)
    if not kind:
        return False
    text = str(value)
    if not text.strip() or text == REDACTED:
        return False
    return kind == _SECRET or token_like(text)


_SECRET, _KEY_NAME = 1, 2


@functools.lru_cache(maxsize=1 << 14)
def _key_kind(key: str) -> int:
    """0: an ordinary key; _SECRET: its value is a secret; _KEY_NAME: when the value is a token (cached:
    a plan document repeats the same few hundred keys)."""
    return _SECRET if is_secret_name(key) else _KEY_NAME if is_key_name(key) else 0


@functools.lru_cache(maxsize=1 << 14)
def redact_string(text: str) -> str:
    """``text`` with credential shapes and secret-named literals replaced; base64 holding one, whole."""
    if len(text) >= 16 and _BASE64.fullmatch(text.replace("\n", "").replace("\r", "")) \
            and _decoded_holds_secret(text):
        return f"{REDACTED} ({len(text.encode())} bytes of base64 holding a credential)"
    out = text
    hits = list(_shape_hits(text))
    if "=" in text or "-" in text:  # an assignment or an option: the only places a named literal sits
        hits += list(_command_hits(text))
    if "=" in text or ": " in text or ":\t" in text:
        hits += [("a secret-named pair", m.group(2)) for m in _TEXT_PAIR.finditer(text)
                 if _key_kind(m.group(1)) == _SECRET and not _is_reference(m.group(2))]
    for _, hit in hits:
        if len(hit) >= 3:
            out = out.replace(hit, REDACTED)
    return text if out == text else out


def _decoded_holds_secret(text: str) -> bool:
    try:
        raw = base64.b64decode(text.replace("\n", "").replace("\r", ""), validate=True)
    except (binascii.Error, ValueError):
        return False
    if raw[:2] == b"\x1f\x8b":  # gzip (cloud-init's gzip+base64 user data)
        try:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            raw = d.decompress(raw, MAX_DECODED_BYTES)
            if d.unconsumed_tail:
                return True  # too large to look into: not printed either
        except zlib.error:
            return False
    decoded = raw.decode("utf-8", "replace")
    if decoded.count("\ufffd") > len(decoded) // 10:
        return False  # binary, not text
    return redact_string(decoded) != decoded
