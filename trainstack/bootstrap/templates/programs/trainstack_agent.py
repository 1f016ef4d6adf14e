#!/usr/bin/env python3
"""trainstack node agent: the command line the node's scripts call (one module per duty behind it).

- ``meta PATH``: read instance metadata with a token (trainstack_metadata).
- ``extract``, ``exec``, ``signal-trainer``, ``reap``: around the trainer (trainstack_launch).
- ``oss --region R --endpoint E CMD ARGS``, with the OSS venv's Python (Alibaba's SDK from the VPC
  PyPI mirror) on the internal endpoint: ``download``, ``download-dir``, ``restore``, ``upload-dir``,
  ``mirror`` (code, checkpoints and the dataset copy: trainstack_sync), ``job-settings URI DIR
  --rank N --tag TAG`` (the job settings channel: trainstack_settings).

Stopping the instance and installing the node programs are the boot programs' own commands
(trainstack_cloud.py, trainstack_programs.py): the user data carries them, not this agent. Each
command imports only its own modules. Stdlib only and Python 3.6 compatible (Alibaba Cloud Linux 3
ships 3.6); only the ``oss`` commands import the SDK.
"""

import sys

from trainstack_metadata import Metadata, MetadataError, log

#: oss COMMAND -> (its options, which must all be given); every command takes two arguments
OSS_COMMANDS = {"download": (), "download-dir": (), "restore": ("--state",), "upload-dir": ("--state",),
                "mirror": (), "job-settings": ("--rank", "--tag")}
OSS_OPTIONS = ("--state", "--rank", "--tag")


def _options(args):
    """({option: value}, the other arguments) of an oss command line."""
    found, rest, i = {}, [], 0
    while i < len(args):
        if args[i] in OSS_OPTIONS:
            if i + 1 >= len(args):
                raise ValueError("%s needs a value" % args[i])
            found[args[i]], i = args[i + 1], i + 2
        else:
            rest.append(args[i])
            i += 1
    return found, rest


def _oss_run(cmd, store, args, opt, region, digest_source):
    """What one oss command did, as a few words for the log line."""
    if cmd == "job-settings":
        from trainstack_settings import job_settings, trusted_digest

        return job_settings(store, args[0], args[1], int(opt["--rank"]),
                            digest_source or (lambda: trusted_digest(opt["--tag"], region)))
    import trainstack_sync as sync

    if cmd == "download":
        sync.download(store, args[0], args[1])
        return "1 file"
    if cmd == "download-dir":
        return "%d files" % sync.download_dir(store, args[0], args[1])
    if cmd == "mirror":
        return "%d files fetched, %d already there" % sync.mirror(store, args[0], args[1])
    if cmd == "restore":
        return "%d files restored" % sync.restore(store, args[0], args[1], opt["--state"])
    return "%d files uploaded, %d unchanged" % sync.upload_dir(store, args[0], args[1], opt["--state"])


def oss_main(argv, store_factory=None, digest_source=None):
    """``oss --region R --endpoint E COMMAND ARGS``; ``store_factory(region, endpoint)``
    replaces the SDK in tests. One log line either way; 0 or 1."""
    try:
        opt, args = _options(argv[5:])
        cmd = argv[4] if len(argv) > 4 and argv[0] == "--region" and argv[2] == "--endpoint" else None
        if cmd not in OSS_COMMANDS or len(args) != 2 or sorted(opt) != sorted(OSS_COMMANDS[cmd]):
            raise ValueError("usage: oss --region R --endpoint E COMMAND ARGS "
                             "[--state F | --rank N --tag T]")
        if store_factory is None:
            from trainstack_store import sdk_store as store_factory
        done = _oss_run(cmd, store_factory(argv[1], argv[3]), args, opt, argv[1], digest_source)
        log("oss %s %s -> %s: %s" % (cmd, args[0], args[1], done))
        return 0
    except Exception as exc:  # whatever the SDK raised
        log("oss %s failed: %s: %s" % (" ".join(argv[4:5]), type(exc).__name__, exc))
        return 1


USAGE = ("usage: meta PATH | extract ARCHIVE DIR | oss --region R --endpoint E CMD "
         "| signal-trainer SIG [--pidfile F] | exec --region R [--secret=NAME=SECRET ...] -- COMMAND "
         "| reap --root PID [--timeout S]")


def _launch_command(cmd, rest):
    """The commands around the trainer (trainstack_launch); None when ``cmd`` is not one of them."""
    import trainstack_launch as launch

    if cmd == "extract" and len(rest) == 2:
        import tarfile
        import zipfile

        try:
            log("%s: %d members extracted into %s" % (rest[0], launch.safe_extract(rest[0], rest[1]), rest[1]))
        except (tarfile.TarError, zipfile.BadZipfile) as exc:
            log(str(exc))
            return 1
        return 0
    if cmd == "exec":
        return launch.exec_main(rest)
    if cmd == "reap" and "--root" in rest:
        timeout = float(rest[rest.index("--timeout") + 1]) if "--timeout" in rest else 30.0
        launch.reap(int(rest[rest.index("--root") + 1]), timeout)
        return 0
    if cmd == "signal-trainer" and rest:
        pidfile = rest[rest.index("--pidfile") + 1] if "--pidfile" in rest else launch.DEFAULT_PIDFILE
        sent = launch.signal_trainer(pidfile, launch.signal_number(rest[0]))
        log("SIG%s -> %s" % (rest[0].upper().replace("SIG", ""), sent or "no trainer running"))
        return 0
    return None


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write((__doc__ or USAGE) + "\n")  # the node's copy has no docstrings
        return 0
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "meta" and len(rest) == 1:
            sys.stdout.write(Metadata().require(rest[0]) + "\n")
            return 0
        if cmd == "oss":
            return oss_main(rest)
        if cmd in ("extract", "exec", "reap", "signal-trainer"):
            done = _launch_command(cmd, rest)
            if done is not None:
                return done
    except (MetadataError, ValueError, OSError) as exc:
        log(str(exc))
        return 1
    log(USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
