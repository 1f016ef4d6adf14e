"""trainstack node programs: what the launch script asks of the agent around the trainer (launch).

- ``exec --region R --secret NAME=SECRET ... -- COMMAND``: read each job secret from KMS Secrets
  Manager (GetSecretValue, signed with the RAM role's STS credentials), put it in this process's
  environment only and exec COMMAND; values are never logged or written.
- ``extract ARCHIVE DIR``: unpack a code archive, refusing members that would land outside.
- ``signal-trainer SIG``: deliver a signal to the trainer recorded in a pid file: the checkpoint
  signal to its rank processes, SIGTERM/SIGINT to its launcher processes.
- ``reap --root PID --timeout S``: after the trainer exits, wait for processes it left behind (a
  launcher that died before its torchrun) and kill what is left after S seconds.

Stdlib only and Python 3.6 compatible (the image's python3 runs it).
"""

import base64
import os
import signal
import stat
import tarfile
import time
import zipfile
from urllib.error import URLError

from trainstack_cloud import rpc_call
from trainstack_metadata import Metadata, MetadataError, log

DEFAULT_PIDFILE = "/run/trainstack/trainer.pid"
#: KMS 2016-01-20, the RPC-style API of GetSecretValue (same signature as ECS):
#: https://www.alibabacloud.com/help/en/kms/key-management-service/developer-reference/api-kms-2016-01-20-getsecretvalue
KMS_API_VERSION = "2016-01-20"


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

def unsafe_path(name):
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
                why = unsafe_path(info.filename)
                if why:
                    raise ValueError("unsafe archive member %r: %s" % (info.filename, why))
            zf.extractall(dest)  # zip symlinks are written as plain files
        return len(members)
    with tarfile.open(archive, "r:*") as tf:
        members = tf.getmembers()
        for m in members:
            why = unsafe_path(m.name)
            if not why and (m.issym() or m.islnk()):
                why = unsafe_path(m.linkname) and "link to %r" % m.linkname
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
