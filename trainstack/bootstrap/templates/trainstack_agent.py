#!/usr/bin/env python3
"""trainstack node agent: the few cloud calls a training node makes about itself.

Stdlib only and Python 3.6 compatible (Alibaba Cloud Linux 3 ships 3.6), because it runs
before any Python environment of the job exists; only the ``oss`` commands import a library.

- ``meta PATH``: read instance metadata with a metadata token, so it works when metadata
  access is hardened (``http_tokens = required``).
- ``stop-instance``: ECS StopInstance with StoppedMode=StopCharging on this instance, signed
  with the instance RAM role's STS credentials, so an idle GPU node stops billing.
- ``extract ARCHIVE DIR``: unpack a code archive, refusing members that would land outside.
- ``oss --region R --endpoint E CMD``: code and checkpoints on OSS, with the OSS venv's Python
  (Alibaba's SDK from the VPC PyPI mirror: no internet egress) on the internal endpoint:
  ``download URI FILE``, ``download-dir URI DIR``, ``restore URI DIR --state F`` (into an
  empty DIR), ``upload-dir DIR URI --state F`` (new or changed files; never deletes).
- ``oss ... job-settings URI DIR --rank N --tag TAG``: the job settings channel. Reads the SHA-256
  the deployer tagged on this instance (ECS ListTagResources, signed with the RAM role: instance
  tags are not in the metadata service), downloads the settings document from the stack bucket,
  checks it against that digest (retrying while ``pulumi up`` is still writing either), and writes
  this rank's files into DIR (only the fixed names ``JOB_SETTINGS_FILES``); unchanged settings are
  not downloaded again.
- ``signal-trainer SIG``: deliver a signal to the trainer recorded in a pid file: the
  checkpoint signal to its rank processes, SIGTERM/SIGINT to its launcher processes.
- ``exec --region R --secret NAME=SECRET ... -- COMMAND``: read each job secret from KMS
  Secrets Manager (GetSecretValue, signed with the RAM role's STS credentials), put it in
  this process's environment only and exec COMMAND; values are never logged or written.
- ``reap --root PID --timeout S``: after the trainer exits, wait for processes it left
  behind (a launcher that died before its torchrun) and kill what is left after S seconds.
"""

import base64
import calendar
import re
import fcntl
import hashlib
import hmac
import json
import os
import signal
import stat
import sys
import tarfile
import threading
import time
import uuid
import zipfile
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


# --- ECS RPC (signature version 1.0, HMAC-SHA1) -----------------------------------------

def percent_encode(value):
    """RFC 3986 encoding as Alibaba Cloud's RPC signature requires (space -> %20, ~ kept)."""
    return quote(str(value), safe="~")


def sign_rpc(params, secret, method="GET"):
    canonical = "&".join("%s=%s" % (percent_encode(k), percent_encode(params[k])) for k in sorted(params))
    string_to_sign = "%s&%s&%s" % (method, percent_encode("/"), percent_encode(canonical))
    digest = hmac.new((secret + "&").encode(), string_to_sign.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


ECS_API_VERSION = "2014-05-26"
#: KMS 2016-01-20, the RPC-style API of GetSecretValue (same signature as ECS):
#: https://www.alibabacloud.com/help/en/kms/key-management-service/developer-reference/api-kms-2016-01-20-getsecretvalue
KMS_API_VERSION = "2016-01-20"


def ecs_call(action, params, creds, endpoint, timeout=15.0):
    return rpc_call("ECS", ECS_API_VERSION, action, params, creds, endpoint, timeout)


def rpc_call(service, api_version, action, params, creds, endpoint, timeout=15.0):
    """One signed RPC call (signature version 1.0); RuntimeError with the API's code on failure."""
    query = dict(params)
    query.update({
        "Action": action, "Version": api_version, "Format": "JSON",
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
        raise RuntimeError("%s %s failed (HTTP %s) %s" % (service, action, exc.code, detail))


def stop_instance(mode="StopCharging", region=None, attempts=3):
    """Stop this instance; StopCharging releases the GPUs so they stop billing."""
    md = Metadata()
    instance_id = md.require("meta-data/instance-id")
    region = region or md.require("meta-data/region-id")
    endpoint = os.environ.get("TRAINSTACK_ECS_ENDPOINT") or "https://ecs-vpc.%s.aliyuncs.com" % region
    delay = float(os.environ.get("TRAINSTACK_RETRY_SECONDS", "5"))
    for attempt in range(1, attempts + 1):
        try:
            # fresh each try (STS credentials rotate); only the first try waits for the role
            creds = md.ram_credentials(wait=None if attempt == 1 else 0)
            answer = ecs_call("StopInstance", {"InstanceId": instance_id, "StoppedMode": mode,
                                               "ForceStop": "false"}, creds, endpoint)
            log("StopInstance %s (%s) accepted: request %s" % (instance_id, mode, answer.get("RequestId")))
            return 0
        except (MetadataError, RuntimeError, URLError, OSError, ValueError) as exc:
            log("StopInstance attempt %d/%d: %s" % (attempt, attempts, exc))
            if attempt < attempts:
                time.sleep(delay * attempt)
    return 1


# --- job secrets (KMS Secrets Manager) ------------------------------------------------------

def kms_endpoint(region):
    """KMS's VPC endpoint of the region (no internet egress needed): kms-vpc.<region>.aliyuncs.com
    (KMS request syntax: https://www.alibabacloud.com/help/doc-detail/69006.htm; HTTPS only)."""
    return os.environ.get("TRAINSTACK_KMS_ENDPOINT") or "https://kms-vpc.%s.aliyuncs.com" % region


def secret_value(answer, secret):
    """The text of a GetSecretValue answer (SecretDataType text, or binary as base64)."""
    data = answer.get("SecretData")
    if data is None:
        raise ValueError("KMS answered without SecretData for secret %s" % secret)
    if answer.get("SecretDataType") == "binary":
        try:
            data = base64.b64decode(data).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise ValueError("secret %s is binary and not UTF-8 text: an environment variable cannot hold it" % secret)
    if "\0" in data:
        raise ValueError("secret %s contains a NUL character: an environment variable cannot hold it" % secret)
    return data


def fetch_secrets(pairs, region, metadata=None, attempts=3):
    """{env name: value} for [(env name, KMS secret name)]; logs names only, never values."""
    md = metadata or Metadata()
    endpoint = kms_endpoint(region)
    delay = float(os.environ.get("TRAINSTACK_RETRY_SECONDS", "5"))
    values = {}
    for name, secret in pairs:
        for attempt in range(1, attempts + 1):
            try:
                creds = md.ram_credentials(wait=None if attempt == 1 else 0)
                answer = rpc_call("KMS", KMS_API_VERSION, "GetSecretValue", {"SecretName": secret}, creds, endpoint)
                values[name] = secret_value(answer, secret)
                log("job secret %s read from KMS secret %s" % (name, secret))
                break
            except ValueError:
                raise
            except (MetadataError, RuntimeError, URLError, OSError) as exc:
                log("KMS secret %s for %s, attempt %d/%d: %s" % (secret, name, attempt, attempts, exc))
                if attempt == attempts:
                    raise RuntimeError("cannot read KMS secret %s for %s" % (secret, name))
                time.sleep(delay * attempt)
    return values


EXIT_SECRETS = 14


def exec_main(argv, execvpe=os.execvpe):
    """``exec --region R [--secret NAME=SECRET ...] -- COMMAND...``: exec COMMAND with the job
    secrets added to its environment (and so to its children's only)."""
    region, pairs, i = None, [], 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--region" and i + 1 < len(argv):
            region, i = argv[i + 1], i + 2
        elif argv[i].startswith("--secret="):
            name, sep, secret = argv[i][len("--secret="):].partition("=")
            if not sep or not name or not secret:
                log("exec: --secret=NAME=SECRET expected")
                return 2
            pairs.append((name, secret))
            i += 1
        else:
            log("exec: unexpected argument %r" % argv[i])
            return 2
    command = argv[i + 1:]
    if not command:
        log("usage: exec --region R [--secret=NAME=SECRET ...] -- COMMAND...")
        return 2
    env = dict(os.environ)
    if pairs:
        try:
            env.update(fetch_secrets(pairs, region or Metadata().require("meta-data/region-id")))
        except (MetadataError, RuntimeError, ValueError) as exc:
            log("FATAL: %s; the trainer was not started" % exc)
            return EXIT_SECRETS
    execvpe(command[0], command, env)
    return 127


# --- code archives ---------------------------------------------------------------------

def _unsafe(name):
    """Why a path in an archive would leave the directory, or None: a relative path without
    `..` only goes down, and so does any chain of links with such targets."""
    name = name.replace("\\", "/")
    if not name or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    if ".." in name.split("/"):
        return "'..' in the path"
    return None


def safe_extract(archive, dest):
    """Unpack ``archive`` into ``dest``, or raise ValueError before writing anything when a
    member could land outside it. Returns the number of members."""
    if not os.path.isdir(dest):
        os.makedirs(dest)
    if archive.lower().endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            members = zf.infolist()
            for info in members:
                why = _unsafe(info.filename)
                if why:
                    raise ValueError("unsafe archive member %r: %s" % (info.filename, why))
            zf.extractall(dest)  # zip symlinks are written as plain files
        return len(members)
    with tarfile.open(archive, "r:*") as tf:
        members = tf.getmembers()
        for m in members:
            why = _unsafe(m.name)
            if not why and (m.issym() or m.islnk()):
                why = _unsafe(m.linkname) and "link to %r" % m.linkname
            if not why and not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
                why = "device or fifo"
            if why:
                raise ValueError("unsafe archive member %r: %s" % (m.name, why))
            m.mode &= ~(stat.S_ISUID | stat.S_ISGID) & 0o7777
        if hasattr(tarfile, "data_filter"):  # Python 3.12 (and patched 3.8+): its check too
            tf.extractall(dest, members=members, filter="data")
        else:
            tf.extractall(dest, members=members)
    return len(members)


# --- code and checkpoints on OSS (run with the OSS venv's Python) -----------------------

PART_SIZE = 64 << 20  # multipart above this; the SDK grows it past 10000 parts


JOB_SETTINGS_KIND = "trainstack-job-settings"
JOB_SETTINGS_FILES = ("settings.env", "job.env", "hostfile", "deepspeed-hostfile")
#: settings.env and job.env may hold a code URI's credentials and the command line: root only
PRIVATE_FILES = ("settings.env", "job.env")
DIGEST_FILE = ".job-settings.sha256"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def trusted_digest(tag, region=None, metadata=None):
    """The SHA-256 the deployer tagged on this instance (``tag``), read with ListTagResources."""
    md = metadata or Metadata()
    instance_id = md.require("meta-data/instance-id")
    region = region or md.require("meta-data/region-id")
    endpoint = os.environ.get("TRAINSTACK_ECS_ENDPOINT") or "https://ecs-vpc.%s.aliyuncs.com" % region
    answer = ecs_call("ListTagResources", {"RegionId": region, "ResourceType": "instance",
                                           "ResourceId.1": instance_id, "Tag.1.Key": tag},
                      md.ram_credentials(), endpoint)
    for item in (answer.get("TagResources") or {}).get("TagResource") or []:
        if item.get("TagKey") == tag and item.get("ResourceId", instance_id) == instance_id:
            value = str(item.get("TagValue") or "").strip().lower()
            if _SHA256.match(value):
                return value
            raise ValueError("the %s tag of %s is not a SHA-256: %r" % (tag, instance_id, value[:80]))
    raise ValueError("instance %s has no %s tag" % (instance_id, tag))


def _cached(dest):
    try:
        with open(os.path.join(dest, DIGEST_FILE)) as fh:
            lines = fh.read().split()
    except OSError:
        return None, []
    return (lines[0], lines[1:]) if lines else (None, [])


def write_settings(doc, dest, rank, digest):
    """This rank's files of a verified settings document into ``dest``; returns their names."""
    if doc.get("kind") != JOB_SETTINGS_KIND or doc.get("schema_version") != 1:
        raise ValueError("not a trainstack job settings document (schema 1)")
    ranks = doc.get("ranks") or []
    if not 0 <= rank < len(ranks):
        raise ValueError("the job settings have %d node(s); this is node %d" % (len(ranks), rank))
    files = dict(doc.get("shared") or {})
    files.update(ranks[rank])
    unknown = sorted(set(files) - set(JOB_SETTINGS_FILES))
    if unknown or not all(isinstance(v, str) for v in files.values()):
        raise ValueError("unexpected job settings files: %s" % (unknown or "non-text content"))
    for name in JOB_SETTINGS_FILES:  # a file the new settings no longer have (a DeepSpeed hostfile)
        if name not in files and os.path.exists(os.path.join(dest, name)):
            os.remove(os.path.join(dest, name))
    for name in sorted(files):
        atomic_write(os.path.join(dest, name), files[name], 0o600 if name in PRIVATE_FILES else 0o644)
    atomic_write(os.path.join(dest, DIGEST_FILE), "\n".join([digest] + sorted(files)) + "\n")
    return sorted(files)


def job_settings(store, uri, dest, rank, digest_source, attempts=None, delay=None):
    """Bring this rank's job settings into ``dest``; 'unchanged' or 'updated'. The object and the tag
    are written by the same `pulumi up` (object first), so a mismatch is retried for a while."""
    attempts = attempts or int(os.environ.get("TRAINSTACK_SETTINGS_ATTEMPTS") or 30)
    delay = float(os.environ.get("TRAINSTACK_RETRY_SECONDS") or 10) if delay is None else delay
    bucket, key = split_uri(uri)
    if not os.path.isdir(dest):
        os.makedirs(dest)
    why = "no attempt"
    for attempt in range(1, attempts + 1):
        try:
            want = digest_source()
            cached, names = _cached(dest)
            if cached == want and names and all(os.path.exists(os.path.join(dest, n)) for n in names):
                return "unchanged"
            tmp = os.path.join(dest, ".job-settings.download")
            store.get(bucket, key, tmp)
            with open(tmp, "rb") as fh:
                data = fh.read()
            os.remove(tmp)
            got = hashlib.sha256(data).hexdigest()
            if got == want:
                write_settings(json.loads(data.decode("utf-8")), dest, rank, got)
                return "updated"
            why = "the object's SHA-256 %s... is not the tag's %s..." % (got[:12], want[:12])
        except (MetadataError, RuntimeError, URLError, OSError) as exc:
            why = str(exc)
        if attempt < attempts:
            log("job settings, attempt %d/%d: %s" % (attempt, attempts, why))
            time.sleep(delay)
    raise ValueError("job settings %s: %s" % (uri, why))


class StsCredentials(object):
    """The RAM role's credentials, read again every 5 minutes (the metadata service renews
    them long before they expire); thread-safe: the SDK signs from its transfer threads."""

    def __init__(self, metadata=None, clock=time.monotonic):
        self.metadata, self.clock = metadata or Metadata(), clock
        self.lock, self.creds, self.read_at = threading.Lock(), None, 0.0

    def get(self):
        with self.lock:
            if self.creds is None or self.clock() - self.read_at >= 300:
                self.creds, self.read_at = self.metadata.ram_credentials(), self.clock()
            return self.creds


class SdkStore(object):
    """list, get and put with Alibaba's OSS SDK, imported only here."""

    def __init__(self, region, endpoint, credentials):
        import alibabacloud_oss_v2 as oss

        def provide():
            c = credentials.get()
            return oss.Credentials(c["AccessKeyId"], c["AccessKeySecret"], c.get("SecurityToken") or None)

        cfg = oss.config.load_default()
        cfg.region, cfg.endpoint = region, endpoint
        cfg.credentials_provider = oss.credentials.CredentialsProviderFunc(provide)
        self.oss, self.client = oss, oss.Client(cfg)

    def list(self, bucket, prefix):  # [(key, size, LastModified epoch)], every page
        pages = self.client.list_objects_v2_paginator().iter_page(
            self.oss.ListObjectsV2Request(bucket=bucket, prefix=prefix))
        return [(o.key, int(o.size), calendar.timegm(o.last_modified.utctimetuple()))
                for page in pages for o in page.contents or ()]

    def get(self, bucket, key, path):  # ranged parts into a temporary file, then renamed
        self.client.downloader(part_size=PART_SIZE, parallel_num=4).download_file(
            self.oss.GetObjectRequest(bucket=bucket, key=key), path)

    def put(self, path, bucket, key):  # PutObject, or a multipart upload above PART_SIZE
        self.client.uploader(part_size=PART_SIZE, parallel_num=4).upload_file(
            self.oss.PutObjectRequest(bucket=bucket, key=key), path)


def split_uri(uri, folder=False):
    """oss://bucket[.endpoint]/key -> (bucket, key); a folder's key ends with / (or is empty)."""
    bucket, _, key = uri[6:].partition("/") if uri.startswith("oss://") else ("", "", "")
    if not bucket:
        raise ValueError("not oss://bucket/...: %r" % uri)
    return bucket.split(".")[0], key + "/" if folder and key and not key.endswith("/") else key


def signature(st):
    return [st.st_size, st.st_mtime_ns]


def download_dir(store, uri, dest, record=None):
    """Every object under ``uri`` into ``dest``, each as old as its object; returns the count."""
    bucket, prefix = split_uri(uri, True)
    count = 0
    for key, _, modified in store.list(bucket, prefix):
        rel = key[len(prefix):]
        if not rel or rel.endswith("/"):  # a folder marker
            continue
        why = _unsafe(rel) or ({"", "."} & set(rel.split("/")) and "an empty or '.' part")
        if why:
            raise ValueError("object key %r cannot be a local path under %s: %s" % (key, dest, why))
        path = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        store.get(bucket, key, path)
        os.utime(path, (modified, modified))
        if record is not None:
            record[rel] = signature(os.stat(path))
        count += 1
    return count


class State(object):
    """What this node last uploaded or restored to one prefix (relative path -> [size,
    mtime_ns]). While held, its lock file keeps the sync service and the launcher's last
    upload from running at the same time."""

    def __init__(self, path, uri):
        self.path, self.uri, self.files = path, uri, {}

    def __enter__(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self.lock = open(self.path + ".lock", "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        try:
            with open(self.path) as fh:
                data = json.load(fh)
            self.files = data["files"] if data.get("uri") == self.uri else {}  # another prefix: no record
        except (OSError, ValueError, KeyError):
            pass
        return self

    def save(self):
        atomic_write(self.path, json.dumps({"uri": self.uri, "files": self.files}, sort_keys=True))

    def __exit__(self, *exc):
        self.save()
        self.lock.close()  # releases the lock


def restore(store, uri, dest, state_path):
    """``uri`` into ``dest`` if it is empty or missing; returns the files restored."""
    os.makedirs(dest, exist_ok=True)
    if os.listdir(dest):
        log("%s is not empty: nothing restored" % dest)
        return 0
    with State(state_path, uri) as state:
        return download_dir(store, uri, dest, state.files)


def upload_dir(store, src, uri, state_path):
    """Upload the files of ``src`` that are new or changed since this node last uploaded or
    restored them (with no record: not in OSS, of another size, or newer than the copy there);
    returns (uploaded, unchanged)."""
    bucket, prefix = split_uri(uri, True)
    sent = same = 0
    with State(state_path, uri) as state:
        remote = dict((key, (size, modified)) for key, size, modified in store.list(bucket, prefix))
        for directory, dirs, files in os.walk(src):
            dirs.sort()
            for path in [os.path.join(directory, name) for name in sorted(files)]:
                rel = os.path.relpath(path, src)
                if not os.path.isfile(path):  # a socket, fifo or broken link
                    continue
                st, known, record = os.stat(path), remote.get(prefix + rel), state.files.get(rel)
                if known and known[0] == st.st_size and (
                        record == signature(st) if record else st.st_mtime <= known[1]):
                    same += 1
                    continue
                store.put(path, bucket, prefix + rel)
                sent += 1
                # written to while it was sent: send it again next time
                state.files[rel] = signature(st) if signature(os.stat(path)) == signature(st) else [-1, -1]
                state.save()  # progress survives an interrupted round
    return sent, same


def _option(args, name):
    """(value of ``name VALUE`` in args or None, args without it)."""
    if name not in args:
        return None, args
    i = args.index(name)
    if i + 1 >= len(args):
        raise ValueError("%s needs a value" % name)
    return args[i + 1], args[:i] + args[i + 2:]


def oss_main(argv, store_factory=None, digest_source=None):
    """``oss --region R --endpoint E COMMAND ARGS``; ``store_factory(region, endpoint)``
    replaces the SDK in tests. One log line either way; 0 or 1."""
    try:
        args = list(argv[5:])
        state, args = _option(args, "--state")
        rank, args = _option(args, "--rank")
        tag, args = _option(args, "--tag")
        cmd = argv[4] if len(argv) > 4 and argv[0] == "--region" and argv[2] == "--endpoint" else None
        if len(args) != 2 or cmd not in ("download", "download-dir", "restore", "upload-dir", "job-settings") or (
                cmd in ("restore", "upload-dir")) != bool(state) or (cmd == "job-settings") != bool(rank and tag):
            raise ValueError("usage: oss --region R --endpoint E COMMAND ARGS [--state F | --rank N --tag T]")
        store = (store_factory or (lambda r, e: SdkStore(r, e, StsCredentials())))(argv[1], argv[3])
        if cmd == "job-settings":
            region = argv[1]
            done = job_settings(store, args[0], args[1], int(rank),
                                digest_source or (lambda: trusted_digest(tag, region)))
        elif cmd == "download":
            bucket, key = split_uri(args[0])
            path = os.path.abspath(args[1])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            store.get(bucket, key, path)
            done = "1 file"
        elif cmd == "download-dir":
            done = "%d files" % download_dir(store, args[0], args[1])
        elif cmd == "restore":
            done = "%d files restored" % restore(store, args[0], args[1], state)
        else:
            done = "%d files uploaded, %d unchanged" % upload_dir(store, args[0], args[1], state)
        log("oss %s %s -> %s: %s" % (cmd, args[0], args[1], done))
        return 0
    except Exception as exc:  # whatever the SDK raised
        log("oss %s failed: %s: %s" % (" ".join(argv[4:5]), type(exc).__name__, exc))
        return 1


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


#: the launch script exports it with the trainer's pid; every process the trainer starts inherits it
MARKER = "TRAINSTACK_TRAINER_PID"


def proc_info(pid):
    """(parent pid, environment) of a process, or None when it is gone or unreadable."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        with open("/proc/%d/environ" % pid, "rb") as fh:
            raw = fh.read()
    except (OSError, IndexError, ValueError):
        return None
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return ppid, env


def job_processes(root):
    """{pid: (ppid, is a rank)} of every process carrying the trainer's marker (the whole job,
    orphans included), or None when none does (a trainer started without the marker)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        info = proc_info(int(entry))
        if info and info[1].get(MARKER) == str(root):
            found[int(entry)] = (info[0], "LOCAL_RANK" in info[1])
    return found or None


def trainer_targets(root, signum):
    """Who gets ``signum``. A rank is a process whose environment has LOCAL_RANK (torchrun,
    Accelerate and DeepSpeed set it per worker) and whose parent has none; the checkpoint signal
    goes to the ranks, which trap it (the launchers in between ignore it: inherited SIG_IGN),
    or, when there are none (a script run once per node), to the root and its children.
    SIGTERM/SIGINT go to every launcher process (no LOCAL_RANK): torchrun stops its ranks
    itself, and a launcher that would die of it (llamafactory-cli, swift, a shell script) does
    not leave its torchrun running. Without marked processes: the root and its children."""
    tree = job_processes(root)
    if tree is None:
        return [root] + ([] if signum in (signal.SIGTERM, signal.SIGINT) else children_of(root))
    if signum in (signal.SIGTERM, signal.SIGINT):
        return sorted(pid for pid, (_, rank) in tree.items() if not rank)
    if signum == signal.SIGKILL:
        return sorted(tree)
    ranks = sorted(pid for pid, (ppid, rank) in tree.items() if rank and not tree.get(ppid, (0, False))[1])
    return ranks or [root] + children_of(root)  # no launcher set LOCAL_RANK: the program itself


def signal_trainer(pidfile, signum):
    """Signal the trainer recorded in ``pidfile`` (see trainer_targets). Returns the pids
    signalled ([] when no trainer runs)."""
    try:
        with open(pidfile) as fh:
            root = int(fh.read().strip())
    except (OSError, ValueError):
        return []
    targets = trainer_targets(root, signum)
    sent = []
    for pid in targets:
        try:
            os.kill(pid, signum)
            sent.append(pid)
        except ProcessLookupError:
            pass
    return sent


def reap(root, timeout, poll=0.2):
    """Wait up to ``timeout`` s for the processes the trainer ``root`` left behind, then
    SIGKILL the rest; returns how many were killed."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not job_processes(root):
            return 0
        time.sleep(poll)
    left = sorted(job_processes(root) or ())
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if left:
        log("killed %d process(es) the trainer left running: %s" % (len(left), left))
    return len(left)


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


USAGE = ("usage: meta PATH | stop-instance [--region R] | extract ARCHIVE DIR | oss --region R --endpoint E CMD "

         "| signal-trainer SIG [--pidfile F] | exec --region R [--secret=NAME=SECRET ...] -- COMMAND "
         "| reap --root PID [--timeout S]")


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write((__doc__ or USAGE) + "\n")  # the node's copy has no docstrings
        return 0
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "meta" and len(rest) == 1:
            sys.stdout.write(Metadata().require(rest[0]) + "\n")
            return 0
        if cmd == "stop-instance":
            region = rest[rest.index("--region") + 1] if "--region" in rest else None
            return stop_instance(region=region)
        if cmd == "oss":
            return oss_main(rest)
        if cmd == "extract" and len(rest) == 2:
            log("%s: %d members extracted into %s" % (rest[0], safe_extract(rest[0], rest[1]), rest[1]))
            return 0
        if cmd == "exec":
            return exec_main(rest)
        if cmd == "reap" and "--root" in rest:
            timeout = float(rest[rest.index("--timeout") + 1]) if "--timeout" in rest else 30.0
            reap(int(rest[rest.index("--root") + 1]), timeout)
            return 0
        if cmd == "signal-trainer" and rest:
            pidfile = rest[rest.index("--pidfile") + 1] if "--pidfile" in rest else DEFAULT_PIDFILE
            sent = signal_trainer(pidfile, signal_number(rest[0]))
            log("SIG%s -> %s" % (rest[0].upper().replace("SIG", ""), sent or "no trainer running"))
            return 0
    except (MetadataError, ValueError, OSError, tarfile.TarError, zipfile.BadZipfile) as exc:
        log(str(exc))
        return 1
    log(USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
