"""trainstack node programs: code and checkpoints on OSS (the agent's ``oss`` commands).

``download URI FILE``, ``download-dir URI DIR``, ``restore URI DIR --state F`` (into an empty DIR),
``upload-dir DIR URI --state F`` (new or changed files; never deletes), ``mirror URI DIR`` (the
dataset copy at boot: what is missing or different; resumable), with the OSS venv's Python on the
internal endpoint (trainstack_store). Stdlib only beside the store, Python 3.6 compatible.
"""

import fcntl
import json
import os

from trainstack_launch import unsafe_path
from trainstack_metadata import atomic_write, log
from trainstack_store import split_uri


def signature(st):
    return [st.st_size, st.st_mtime_ns]


def download(store, uri, path):
    bucket, key = split_uri(uri)
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    store.get(bucket, key, path)


def local_path(key, prefix, dest):
    """Where object ``key`` (under ``prefix``) lands in ``dest``; None for a folder marker. An object key
    that would leave ``dest`` is refused (ValueError), never written."""
    rel = key[len(prefix):]
    if not rel or rel.endswith("/"):  # a folder marker
        return None
    why = unsafe_path(rel) or ({"", "."} & set(rel.split("/")) and "an empty or '.' part")
    if why:
        raise ValueError("object key %r cannot be a local path under %s: %s" % (key, dest, why))
    return os.path.join(dest, rel)


def fetch(store, bucket, key, path, modified):
    """One object to ``path``, as old as the object (the mark of a complete copy: the SDK writes a
    temporary file and renames it, and the time is set only after that)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    store.get(bucket, key, path)
    os.utime(path, (modified, modified))


def download_dir(store, uri, dest, record=None):
    """Every object under ``uri`` into ``dest``, each as old as its object; returns the count."""
    bucket, prefix = split_uri(uri, True)
    count = 0
    for key, _, modified in store.list(bucket, prefix):
        path = local_path(key, prefix, dest)
        if path is None:
            continue
        fetch(store, bucket, key, path, modified)
        if record is not None:
            record[os.path.relpath(path, dest)] = signature(os.stat(path))
        count += 1
    return count


#: written into the dataset folder once every object is there (what the trainer may wait for)
MIRROR_DONE = ".trainstack-dataset-complete"
MIRROR_LOCK = ".trainstack-dataset.lock"


def mirror(store, uri, dest):
    """Every object under ``uri`` that ``dest`` does not hold as the same object (its size and
    modification time) into ``dest``: resumable, so a reboot mid-copy (the driver installer's) or a
    second start fetches only the rest. Never deletes. One copy at a time per folder (a lock in it);
    ``MIRROR_DONE`` exists only after a copy found every object in place (removed first thing, so a
    trainer never trusts a folder being rewritten). An object named like the marker or the lock, or
    one whose key cannot be a path under ``dest``, is left out with a log line. Returns (fetched, kept)."""
    bucket, prefix = split_uri(uri, True)
    os.makedirs(dest, exist_ok=True)
    done = os.path.join(dest, MIRROR_DONE)
    fetched = kept = total = 0
    with open(os.path.join(dest, MIRROR_LOCK), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(done):
            os.unlink(done)
        for key, size, modified in store.list(bucket, prefix):
            try:
                path = local_path(key, prefix, dest)
            except ValueError as exc:
                log("dataset copy: left out: %s" % exc)
                continue
            if path is None:
                continue
            if os.path.relpath(path, dest) in (MIRROR_DONE, MIRROR_LOCK):
                log("dataset copy: left out %r: trainstack's own name in %s" % (key, dest))
                continue
            total += size
            try:
                st = os.stat(path)
                same = st.st_size == size and int(st.st_mtime) == int(modified)
            except OSError:
                same = False
            if same:
                kept += 1
                continue
            fetch(store, bucket, key, path, modified)
            fetched += 1
        atomic_write(done, json.dumps({"uri": uri, "objects": fetched + kept, "bytes": total}, sort_keys=True))
    return fetched, kept


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
