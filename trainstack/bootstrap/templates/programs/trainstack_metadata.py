"""trainstack node programs, shared: the log line, atomic writes and the instance metadata service.

Every node program imports it. Stdlib only and Python 3.6 compatible (Alibaba Cloud Linux 3
ships 3.6): it runs before any Python environment of the job exists. It is one of the boot
programs, which the user data carries too (the node needs them to fetch the others).

Metadata reads take a token first (``PUT /latest/api/token``), so they work when metadata access
is hardened (``http_tokens = required``).
"""

import json
import os
import sys
import time
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

METADATA_URL = "http://100.100.100.200"
TOKEN_TTL_HEADER = "X-aliyun-ecs-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aliyun-ecs-metadata-token"


def log(msg):
    sys.stderr.write("trainstack-agent: %s\n" % msg)
    sys.stderr.flush()


def atomic_write(path, text, mode=0o644):
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.rename(tmp, path)


class MetadataError(Exception):
    pass


class Metadata(object):
    """Metadata client that fetches a token first and refreshes it before it expires."""

    def __init__(self, base=None, ttl=None, timeout=2.0, clock=time.monotonic):
        self.base = (base or os.environ.get("TRAINSTACK_METADATA_URL") or METADATA_URL).rstrip("/")
        self.ttl = int(ttl or os.environ.get("TRAINSTACK_METADATA_TOKEN_TTL") or 21600)
        self.timeout = timeout
        self.clock = clock
        self._token = None
        self._renew_at = 0.0

    def token(self):
        if self._token is None or self.clock() >= self._renew_at:
            req = Request(self.base + "/latest/api/token", method="PUT",
                          headers={TOKEN_TTL_HEADER: str(self.ttl)})
            try:
                with urlopen(req, timeout=self.timeout) as resp:
                    token = resp.read().decode().strip()
            except (HTTPError, URLError, OSError) as exc:
                raise MetadataError("metadata token: %s" % exc)
            if not token:
                raise MetadataError("metadata token: empty answer")
            self._token = token
            # renew at 80% of the lifetime: a token never expires between renew and use
            self._renew_at = self.clock() + self.ttl * 0.8
        return self._token

    def get(self, path):
        """The value at ``latest/<path>``, or None when the item does not exist (404)."""
        for attempt in (1, 2):
            req = Request("%s/latest/%s" % (self.base, path.lstrip("/")),
                          headers={TOKEN_HEADER: self.token()})
            try:
                with urlopen(req, timeout=self.timeout) as resp:
                    return resp.read().decode()
            except HTTPError as exc:
                if exc.code == 404:
                    return None
                if exc.code in (401, 403) and attempt == 1:
                    self._token = None  # revoked or expired early: one retry with a new token
                    continue
                raise MetadataError("metadata %s: HTTP %s" % (path, exc.code))
            except (URLError, OSError) as exc:
                raise MetadataError("metadata %s: %s" % (path, exc))
        raise MetadataError("metadata %s: token rejected twice" % path)

    def require(self, path):
        value = self.get(path)
        if value is None or not value.strip():
            raise MetadataError("metadata %s: not found" % path)
        return value.strip()

    def ram_credentials(self, wait=None, poll=None):
        """STS credentials of the instance RAM role (the role name is discovered). The stack
        attaches the role after creating the instance, so early at first boot there may be none
        yet: wait up to ``wait`` seconds (TRAINSTACK_RAM_ROLE_WAIT_SECONDS, 300), asking every
        ``poll`` (TRAINSTACK_RAM_ROLE_POLL_SECONDS, 5), then fail with the last error."""
        if wait is None:
            wait = float(os.environ.get("TRAINSTACK_RAM_ROLE_WAIT_SECONDS") or 300)
        if poll is None:
            poll = float(os.environ.get("TRAINSTACK_RAM_ROLE_POLL_SECONDS") or 5)
        deadline = time.monotonic() + wait
        told = False
        while True:
            try:
                return self._ram_credentials_once()
            except MetadataError as exc:
                if time.monotonic() + poll > deadline:
                    if wait > 0:
                        raise MetadataError("%s (waited %gs)" % (exc, wait))
                    raise
                if not told:
                    log("waiting up to %gs for the instance RAM role: %s" % (wait, exc))
                    told = True
                time.sleep(poll)

    def _ram_credentials_once(self):
        roles = self.get("meta-data/ram/security-credentials/")
        role = (roles or "").strip().splitlines()[0].strip() if (roles or "").strip() else ""
        if not role:
            raise MetadataError("no RAM role is attached to this instance: attach one that may "
                                "call ecs:StopInstance on itself and read/write the job's OSS bucket")
        try:
            creds = json.loads(self.require("meta-data/ram/security-credentials/" + role))
        except ValueError:
            raise MetadataError("RAM role %s credentials: not JSON" % role)
        if creds.get("Code", "Success") != "Success" or not creds.get("AccessKeyId"):
            raise MetadataError("RAM role %s credentials: %s" % (role, creds.get("Code")))
        return creds
