"""``oss://bucket/key`` parsed as a URI, with Alibaba's bucket and object naming rules.

Bucket names (OSS "Bucket naming conventions",
https://www.alibabacloud.com/help/en/oss/user-guide/bucket-naming-conventions, updated 2026-03-20):
lowercase letters, digits and hyphens, starting and ending with a letter or digit, 3 to 63
characters. So ``*``, ``?``, ``team-*`` or ``user:pass@`` can never name a real bucket.

Object keys (OSS object naming: UTF-8, 1 to 1023 bytes, not starting with ``/`` or ``\\``) may
hold any character, but RAM policy resources treat ``*`` and ``?`` as wildcards
(https://www.alibabacloud.com/help/en/oss/user-guide/how-oss-works-with-ram): a key containing them
would grant more than it names, so trainstack refuses them, along with ``.``/``..`` segments,
empty segments, control characters, query strings, fragments and credentials.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
MAX_KEY_BYTES = 1023


class OssUriError(ValueError):
    """Why a string is not a usable ``oss://`` URI (the message never repeats the URI)."""


@dataclass(frozen=True)
class OssUri:
    bucket: str
    key: str  # '' for the whole bucket; a prefix ends with '/'

    @property
    def is_prefix(self) -> bool:
        return self.key == "" or self.key.endswith("/")

    def ram_object_resource(self) -> str:
        """The RAM resource for the objects this URI names: the object, or everything under the prefix."""
        return f"acs:oss:*:*:{self.bucket}/{self.key}*" if self.is_prefix else f"acs:oss:*:*:{self.bucket}/{self.key}"

    def ram_bucket_resource(self) -> str:
        return f"acs:oss:*:*:{self.bucket}"

    def list_prefix(self) -> str:
        """The ``oss:Prefix`` a listing under this URI uses (the object's own key for a file)."""
        return self.key


def parse_oss_uri(text: str) -> OssUri:
    """Parse ``oss://bucket[/key]``; raises :class:`OssUriError` saying what is wrong."""
    if not isinstance(text, str) or not text.startswith("oss://"):
        raise OssUriError("must start with oss://")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise OssUriError("holds a control character (a newline?)")
    if any(c.isspace() for c in text):
        raise OssUriError("holds whitespace")
    parts = urlsplit(text)
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise OssUriError("must not have a query string or fragment (a signed URL is a credential)")
    netloc = parts.netloc
    if "@" in netloc:
        raise OssUriError("must not carry credentials (user:password@); nodes read OSS with their RAM role")
    if ":" in netloc:
        raise OssUriError("must not name a port; the bucket is the first path part")
    bucket = netloc
    if not BUCKET_NAME.fullmatch(bucket):
        why = ("'*' and '?' are not allowed in bucket names (no wildcards)" if any(c in bucket for c in "*?")
               else "bucket names are 3-63 lowercase letters, digits and '-', starting and ending with a "
                    "letter or digit")
        raise OssUriError(f"has no valid bucket name: {why}")
    key = parts.path[1:] if parts.path.startswith("/") else parts.path
    if any(c in key for c in "*?"):
        raise OssUriError("'*' and '?' are not allowed in the object key: RAM would read them as wildcards")
    if key.startswith(("/", "\\")):
        raise OssUriError("the object key must not start with '/' or '\\' (an empty path segment)")
    segments = key.split("/")
    body = segments[:-1] if key.endswith("/") else segments
    if key and any(s in ("", ".", "..") for s in body):
        raise OssUriError("the object key must not have empty, '.' or '..' segments")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise OssUriError(f"the object key is longer than {MAX_KEY_BYTES} bytes")
    return OssUri(bucket=bucket, key=key)
