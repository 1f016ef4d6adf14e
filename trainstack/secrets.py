"""Find credentials where they must never be: profiles, stack config, plan output.

A profile names *where* credentials come from (the Alibaba Cloud credentials chain or
`pulumi config set --secret`); it never holds them. Detection is by key name and by value
shape (AccessKey IDs start with ``LTAI``), so both `access_key_secret: ...` and a key pasted
into `job.env` are caught.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

SECRET_KEY_NAMES = re.compile(
    r"(^|_)(access_?key(_?id|_?secret)?|secret(_?key)?|passw(or)?d|token|credentials?|private_?key"
    r"|api_?key|ak|sk)($|_)", re.I)
ACCESS_KEY_ID = re.compile(r"\bLTAI[0-9A-Za-z]{12,30}\b")
SECRET_LIKE_VALUE = re.compile(r"^[0-9A-Za-z+/=_-]{30}$")
PRIVATE_KEY_BLOCK = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")
REDACTED = "***redacted***"

#: keys whose names look secret but hold references, not secrets
_SAFE_KEYS = {"key_pair", "keypair", "key_name", "kms_key_id", "secret_ref", "kms_secret"}


def looks_secret_value(value: str) -> bool:
    return bool(ACCESS_KEY_ID.search(value) or PRIVATE_KEY_BLOCK.search(value))


def _is_secret_key(key: str) -> bool:
    norm = key.lower().replace("-", "_")
    return norm not in _SAFE_KEYS and bool(SECRET_KEY_NAMES.search(norm))


def find_secrets(doc: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Yield ``(field path, message)`` for every credential-like key or value in ``doc``."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            sub = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and _is_secret_key(k) and isinstance(v, (str, int, float)) and str(v).strip():
                yield sub, ("looks like a credential; profiles must not hold secrets "
                            "(use the credentials chain or `pulumi config set --secret`)")
                continue
            yield from find_secrets(v, sub)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from find_secrets(v, f"{path}[{i}]")
    elif isinstance(doc, str) and looks_secret_value(doc):
        yield path, "value looks like an Alibaba Cloud AccessKey or a private key; remove it"


def redact(obj: Any) -> Any:
    """A deep copy with secret-named keys and secret-shaped values replaced."""
    if isinstance(obj, dict):
        return {k: (REDACTED if isinstance(k, str) and _is_secret_key(k) and obj[k] not in (None, "", [], {})
                    else redact(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        s = ACCESS_KEY_ID.sub(REDACTED, obj)
        return REDACTED if PRIVATE_KEY_BLOCK.search(s) else s
    return obj
