"""trainstack node programs: the job settings channel (docs/day-two.md).

``oss ... job-settings URI DIR --rank N --tag TAG``: reads the SHA-256 the deployer tagged on this
instance (ECS ListTagResources, signed with the RAM role: instance tags are not in the metadata
service), downloads the settings document from the stack bucket, checks it against that digest
(retrying while `pulumi up` is still writing either) and writes this rank's files into DIR (only
the fixed names of ``JOB_SETTINGS_FILES``); unchanged settings are not downloaded again.
Stdlib only beside the store, Python 3.6 compatible.
"""

import hashlib
import json
import os
import re
import time
from urllib.error import URLError

from trainstack_cloud import ecs_call, ecs_endpoint
from trainstack_metadata import Metadata, MetadataError, atomic_write, log
from trainstack_store import split_uri

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
    answer = ecs_call("ListTagResources", {"RegionId": region, "ResourceType": "instance",
                                           "ResourceId.1": instance_id, "Tag.1.Key": tag},
                      md.ram_credentials(), ecs_endpoint(region))
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
