#!/usr/bin/env python3
"""trainstack node agent: the few cloud calls a training node makes about itself.

Stdlib only and Python 3.6 compatible (Alibaba Cloud Linux 3 ships 3.6), because it runs
before any Python environment of the job exists.

- ``meta PATH``: read instance metadata with a metadata token, so it works when metadata
  access is hardened (``http_tokens = required``).
- ``stop-instance``: ECS StopInstance with StoppedMode=StopCharging on this instance, signed
  with the instance RAM role's STS credentials, so an idle GPU node stops billing.
- ``oss ARGS...``: run ossutil with the RAM role's STS credentials in its environment
  (never on the command line) against the region's internal OSS endpoint.
- ``signal-trainer SIG``: deliver a signal to the trainer recorded in a pid file.
"""

import base64
import hashlib
import hmac
import json
import os
import signal
import sys
import time
import uuid
from urllib.error import HTTPError, URLError
from urllib.parse import quote
from urllib.request import Request, urlopen

METADATA_URL = "http://100.100.100.200"
TOKEN_TTL_HEADER = "X-aliyun-ecs-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aliyun-ecs-metadata-token"
DEFAULT_PIDFILE = "/run/trainstack/trainer.pid"


def log(msg):
    sys.stderr.write("trainstack-agent: %s\n" % msg)
    sys.stderr.flush()


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

    def ram_credentials(self):
        """STS credentials of the instance RAM role (the role name is discovered)."""
        roles = self.get("meta-data/ram/security-credentials/")
        role = (roles or "").strip().splitlines()[0].strip() if (roles or "").strip() else ""
        if not role:
            raise MetadataError("no RAM role is attached to this instance: attach one that may "
                                "call ecs:StopInstance on itself and read/write the job's OSS bucket")
        creds = json.loads(self.require("meta-data/ram/security-credentials/" + role))
        if creds.get("Code", "Success") != "Success":
            raise MetadataError("RAM role %s credentials: %s" % (role, creds.get("Code")))
        return creds


# --- ECS RPC (signature version 1.0, HMAC-SHA1) -----------------------------------------

def percent_encode(value):
    """RFC 3986 encoding as Alibaba Cloud's RPC signature requires (space -> %20, ~ kept)."""
    return quote(str(value), safe="~")


def sign_rpc(params, secret, method="GET"):
    canonical = "&".join("%s=%s" % (percent_encode(k), percent_encode(params[k])) for k in sorted(params))
    string_to_sign = "%s&%s&%s" % (method, percent_encode("/"), percent_encode(canonical))
    digest = hmac.new((secret + "&").encode(), string_to_sign.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def ecs_call(action, params, creds, endpoint, timeout=15.0):
    query = dict(params)
    query.update({
        "Action": action, "Version": "2014-05-26", "Format": "JSON",
        "AccessKeyId": creds["AccessKeyId"], "SignatureMethod": "HMAC-SHA1",
        "SignatureVersion": "1.0", "SignatureNonce": str(uuid.uuid4()),
        "Timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    })
    if creds.get("SecurityToken"):
        query["SecurityToken"] = creds["SecurityToken"]
    query["Signature"] = sign_rpc(query, creds["AccessKeySecret"])
    url = endpoint.rstrip("/") + "/?" + "&".join(
        "%s=%s" % (percent_encode(k), percent_encode(v)) for k, v in sorted(query.items()))
    try:
        with urlopen(Request(url), timeout=timeout) as resp:
            return json.loads(resp.read().decode() or "{}")
    except HTTPError as exc:
        body = exc.read().decode(errors="replace")
        try:
            err = json.loads(body)
            detail = "%s: %s" % (err.get("Code"), err.get("Message"))
        except ValueError:
            detail = body[:300]
        raise RuntimeError("ECS %s failed (HTTP %s) %s" % (action, exc.code, detail))


def stop_instance(mode="StopCharging", region=None, attempts=3):
    """Stop this instance; StopCharging releases the GPUs so they stop billing."""
    md = Metadata()
    instance_id = md.require("meta-data/instance-id")
    region = region or md.require("meta-data/region-id")
    endpoint = os.environ.get("TRAINSTACK_ECS_ENDPOINT") or "https://ecs-vpc.%s.aliyuncs.com" % region
    delay = float(os.environ.get("TRAINSTACK_RETRY_SECONDS", "5"))
    for attempt in range(1, attempts + 1):
        try:
            creds = md.ram_credentials()  # fresh each try: STS credentials rotate
            answer = ecs_call("StopInstance", {"InstanceId": instance_id, "StoppedMode": mode,
                                               "ForceStop": "false"}, creds, endpoint)
            log("StopInstance %s (%s) accepted: request %s" % (instance_id, mode, answer.get("RequestId")))
            return 0
        except (MetadataError, RuntimeError, URLError, OSError, ValueError) as exc:
            log("StopInstance attempt %d/%d: %s" % (attempt, attempts, exc))
            if attempt < attempts:
                time.sleep(delay * attempt)
    return 1


# --- ossutil with STS credentials -------------------------------------------------------

def run_ossutil(args, region, endpoint):
    creds = Metadata().ram_credentials()
    env = dict(os.environ, OSS_ACCESS_KEY_ID=creds["AccessKeyId"],
               OSS_ACCESS_KEY_SECRET=creds["AccessKeySecret"])
    if creds.get("SecurityToken"):
        env["OSS_SESSION_TOKEN"] = creds["SecurityToken"]
    exe = os.environ.get("TRAINSTACK_OSSUTIL", "ossutil")
    argv = [exe] + list(args) + ["--region", region, "--endpoint", endpoint]
    os.execvpe(exe, argv, env)


# --- signals ----------------------------------------------------------------------------

def signal_number(name):
    name = str(name).upper()
    if name.isdigit():
        return int(name)
    return int(getattr(signal, name if name.startswith("SIG") else "SIG" + name))


def children_of(pid):
    """Direct children of ``pid``, read from /proc (no psutil on a fresh node)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            kids.append(int(entry))
    return sorted(kids)


def signal_trainer(pidfile, signum):
    """Signal the trainer: torchrun (the pid in ``pidfile``) and its direct children, the rank
    processes, which torchrun starts in their own sessions so a process-group signal would
    miss them. SIGTERM/SIGINT go to torchrun only: it stops its workers itself.
    Returns the pids signalled ([] when no trainer runs)."""
    try:
        with open(pidfile) as fh:
            root = int(fh.read().strip())
    except (OSError, ValueError):
        return []
    targets = [root]
    if signum not in (signal.SIGTERM, signal.SIGINT):
        targets += children_of(root)
    sent = []
    for pid in targets:
        try:
            os.kill(pid, signum)
            sent.append(pid)
        except ProcessLookupError:
            pass
    return sent


def atomic_write(path, text):
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.rename(tmp, path)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(__doc__)
        return 0
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "meta" and len(rest) == 1:
            sys.stdout.write(Metadata().require(rest[0]) + "\n")
            return 0
        if cmd == "stop-instance":
            region = rest[rest.index("--region") + 1] if "--region" in rest else None
            return stop_instance(region=region)
        if cmd == "oss" and len(rest) >= 5 and rest[0] == "--region" and rest[2] == "--endpoint":
            run_ossutil(rest[4:], region=rest[1], endpoint=rest[3])
        if cmd == "signal-trainer" and rest:
            pidfile = rest[rest.index("--pidfile") + 1] if "--pidfile" in rest else DEFAULT_PIDFILE
            sent = signal_trainer(pidfile, signal_number(rest[0]))
            log("SIG%s -> %s" % (rest[0].upper().replace("SIG", ""), sent or "no trainer running"))
            return 0
    except MetadataError as exc:
        log(str(exc))
        return 1
    log("usage: meta PATH | stop-instance [--region R] | oss --region R --endpoint E ARGS... "
        "| signal-trainer SIG [--pidfile F]")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
