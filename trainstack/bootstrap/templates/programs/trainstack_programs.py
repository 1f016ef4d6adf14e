"""trainstack node programs: install the set a manifest names, every file checked by its sha256.

The node programs (this agent, the launch script, the heartbeat, the spot watcher, ...) are objects
in the stack bucket at content-addressed keys, ``job/programs/<sha256>/<name>``, which `pulumi up`
writes and never overwrites or deletes (the node role may read ``job/``, never write it). A manifest
at ``job/programs/<its sha256>/programs.json`` names the set:
``{"kind": "trainstack-node-programs", "schema_version": 1, "programs": {name: sha256}}``.

The manifest's digest comes from what the node trusts: its user data at first boot, its job
settings (checked against the instance tag) at each job start. Nothing is replaced unless every
file of the set verifies; the installed manifest (``programs.json`` in the program directory) is
written last, so an interrupted install is redone next time. A boot program, run on its own with
the OSS venv's Python: ``trainstack_programs.py --region R --endpoint E URI DIR --sha256 D``.
"""

import hashlib
import json
import os
import re
import sys
import time

from trainstack_metadata import log
from trainstack_store import split_uri

MANIFEST = "programs.json"
KIND = "trainstack-node-programs"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class ProgramError(Exception):
    """A program set that cannot be installed: an object is missing, or not what its digest says."""


def sha256_of(path):
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except (OSError, IOError):
        return None


def parse_manifest(data, digest):
    """{name: sha256} of the manifest ``data``, refused unless its own sha256 is ``digest``."""
    got = hashlib.sha256(data).hexdigest()
    if got != digest:
        raise ProgramError("the manifest's sha256 is %s..., not %s..." % (got[:12], digest[:12]))
    try:
        doc = json.loads(data.decode("utf-8"))
    except ValueError:
        doc = None
    programs = doc.get("programs") if isinstance(doc, dict) else None
    if not isinstance(programs, dict) or doc.get("kind") != KIND or doc.get("schema_version") != 1:
        raise ProgramError("the manifest %s... is not a trainstack program set (schema 1)" % digest[:12])
    bad = sorted(str(n) for n, s in programs.items() if not (
        isinstance(n, str) and _NAME.match(n) and n != MANIFEST and isinstance(s, str) and _SHA256.match(s)))
    if bad or not programs:
        raise ProgramError("the manifest %s... names no programs or bad ones: %s" % (digest[:12], bad))
    return programs


def installed(lib):
    """(digest, {name: sha256}) of the set installed in ``lib``; (None, {}) when there is none."""
    path = os.path.join(lib, MANIFEST)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except (OSError, IOError):
        return None, {}
    digest = hashlib.sha256(data).hexdigest()
    try:
        return digest, parse_manifest(data, digest)
    except ProgramError:
        return None, {}


class _Fetcher(object):
    """Objects of one program set into temporary files, each refused unless its sha256 matches."""

    def __init__(self, store, uri, attempts, delay):
        self.store, (self.bucket, self.prefix) = store, split_uri(uri, folder=True)
        self.attempts, self.delay = attempts, delay

    def fetch(self, name, sha, path):
        key, why = "%s%s/%s" % (self.prefix, sha, name), "no attempt"
        for attempt in range(1, self.attempts + 1):
            try:
                self.store.get(self.bucket, key, path)
                break
            except Exception as exc:  # whatever the SDK raised: a missing object, the network
                why = "%s: %s" % (type(exc).__name__, exc)
                if attempt == self.attempts:
                    raise ProgramError("cannot fetch oss://%s/%s: %s" % (self.bucket, key, why))
                log("node program %s, attempt %d/%d: %s" % (name, attempt, self.attempts, why))
                time.sleep(self.delay)
        got = sha256_of(path)
        if got != sha:
            os.remove(path)
            raise ProgramError("oss://%s/%s has sha256 %s..., not %s...: not installing it"
                               % (self.bucket, key, (got or "none")[:12], sha[:12]))


def install(store, uri, lib, digest, attempts=None, delay=None):
    """Install the program set ``digest`` from ``uri`` (``oss://<bucket>/job/programs/``) into
    ``lib``; 'unchanged' when every file is there and verifies, else how many were fetched."""
    if not isinstance(digest, str) or not _SHA256.match(digest):
        raise ProgramError("%r is not a SHA-256" % (digest,))
    have, old = installed(lib)
    if have == digest and all(sha256_of(os.path.join(lib, n)) == s for n, s in old.items()):
        return "unchanged"
    fetcher = _Fetcher(store, uri, attempts or int(os.environ.get("TRAINSTACK_PROGRAMS_ATTEMPTS") or 3),
                       float(os.environ.get("TRAINSTACK_RETRY_SECONDS") or 10) if delay is None else delay)
    if not os.path.isdir(lib):
        os.makedirs(lib)

    def temp(name):
        return os.path.join(lib, ".%s.download" % name)

    fetched = []  # renamed into place only once the whole set verified, the manifest last
    try:
        fetcher.fetch(MANIFEST, digest, temp(MANIFEST))
        with open(temp(MANIFEST), "rb") as fh:
            programs = parse_manifest(fh.read(), digest)
        for name, sha in sorted(programs.items()):
            if sha256_of(os.path.join(lib, name)) != sha:
                fetched.append(name)
                fetcher.fetch(name, sha, temp(name))
        for name in fetched + [MANIFEST]:
            os.chmod(temp(name), 0o644)
            os.rename(temp(name), os.path.join(lib, name))
    finally:
        for name in fetched + [MANIFEST]:
            if os.path.exists(temp(name)):
                os.remove(temp(name))
    for name in set(old) - set(programs):  # a program the new set no longer has
        if os.path.exists(os.path.join(lib, name)):
            os.remove(os.path.join(lib, name))
    return "%d of %d programs fetched (set %s...)" % (len(fetched), len(programs), digest[:12])


USAGE = "usage: trainstack_programs.py --region R --endpoint E URI DIR --sha256 D"


def main(argv, store_factory=None):
    """Install a program set (0), or say in one line why not (1); ``store_factory(region, endpoint)``
    replaces the SDK in tests."""
    if len(argv) != 8 or argv[0] != "--region" or argv[2] != "--endpoint" or argv[6] != "--sha256":
        log(USAGE)
        return 2
    try:
        if store_factory is None:
            from trainstack_store import sdk_store as store_factory
        done = install(store_factory(argv[1], argv[3]), argv[4], argv[5], argv[7])
    except Exception as exc:  # ProgramError, or whatever the SDK raised
        log("FATAL: node programs %s... from %s: %s: %s" % (argv[7][:12], argv[4], type(exc).__name__, exc))
        return 1
    log("node programs %s -> %s: %s" % (argv[4], argv[5], done))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
