"""`trainstack node-files PROFILE | --stack NAME [--rank N] --out DIR`: every file a training
node receives, exactly as rendered, under DIR at its path on the node: what its user data writes
(DIR/etc/trainstack/node.env, DIR/usr/local/sbin/trainstack-boot, ...), the node programs it
installs from the stack bucket (DIR/usr/local/lib/trainstack/trainstack-launch.sh, ..., with their
manifest programs.json) and its job settings, with their modes, plus DIR/user-data.yaml (the whole
cloud-config). Read and shellcheck what will run as root before `pulumi up`; the tests source and
run these files in a sandbox.

A PAI-DLC plan has no node files: DIR/pai-dlc/user-command.sh is the command each pod runs.
The CPFS export address exists only after deploy; ``--cpfs-mount-address`` gives the real one,
otherwise a placeholder stands in.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError, Problem
from ..stack_config import trusted_profile

CPFS_PLACEHOLDER = "cpfs-known-after-deploy.invalid:/share"


def register(sub) -> None:
    p = sub.add_parser("node-files", help="write the files a node receives, exactly as rendered")
    p.add_argument("profile", nargs="?", help="path to a profile YAML (not needed with --stack)")
    p.add_argument("--stack", help="a stack name: stacks/Pulumi.<NAME>.yaml")
    p.add_argument("--rank", type=int, default=0, help="the node (0-based; default 0)")
    p.add_argument("--out", required=True, help="a new or empty directory to write into")
    p.add_argument("--cpfs-mount-address", help="the CPFS protocol mount target, if known (default: a placeholder)")
    p.set_defaults(func=run)


def _plan(args):
    # preview/ loads only for the commands that plan or read a stack
    from ..preview.planner import resolve_config
    from ..preview.sources import find_project, stack_config

    if bool(args.profile) == bool(args.stack):
        raise InputError("give a PROFILE path or --stack NAME" if not args.profile
                         else "give either a PROFILE path or --stack NAME, not both")
    project = find_project()
    if args.stack:
        config, _ = stack_config(project, args.stack)
    else:
        path = Path(args.profile)
        if not path.is_file():
            raise InputError(f"{args.profile}: no such profile file")
        config = dict(project.defaults, **{f"{project.name}:profile": str(path.resolve())})
        with trusted_profile(path):  # a profile named on the command line may live anywhere (as for `plan`)
            return resolve_config(config, project)
    return resolve_config(config, project)


def _out_dir(value: str) -> Path:
    out = Path(value)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise InputError(f"--out {value}: not a directory",
                         problems=[Problem(path="--out", message="must be a new or empty directory", file=value)])
    if out.is_dir() and any(out.iterdir()):
        raise InputError(f"--out {value}: the directory is not empty; nothing is overwritten",
                         problems=[Problem(path="--out", message="must be a new or empty directory (nothing is "
                                                                 "overwritten)", file=value)])
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out {value}: {exc.strerror or exc}") from None
    return out


def _write(out: Path, rel: str, text: str, mode: int) -> Path:
    target = out / rel.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)  # 0600 files never exist wider
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(target, mode)
    return target


def run(args) -> int:
    # launchers/ and bootstrap/ load with the first rule that reads the job, not at the CLI's start
    from ..bootstrap import render_files, render_user_data
    from ..dlc_job import job_inputs

    plan = _plan(args)
    if plan.target == "dlc":
        out = _out_dir(args.out)
        command = job_inputs(plan)["command"]
        _write(out, "pai-dlc/user-command.sh", f"#!/bin/sh\n# what every pod of {plan.name} runs (CreateJob "
                                               f"UserCommand)\n{command}\n", 0o644)
        print(f"{plan.name}: PAI-DLC job; the pods' command is in {out / 'pai-dlc/user-command.sh'}")
        return 0
    if not 0 <= args.rank < plan.nodes:
        raise InputError(f"--rank {args.rank}: the plan has nodes 0..{plan.nodes - 1}")
    cpfs = args.cpfs_mount_address or (CPFS_PLACEHOLDER if plan.storage.cpfs else None)
    rank = min(args.rank, 1) if plan.elastic else args.rank  # every pool node boots rank 1's files
    files = render_files(plan, rank, cpfs_mount_address=cpfs)  # refuses before anything is written
    user_data = render_user_data(plan, rank, cpfs_mount_address=cpfs)
    out = _out_dir(args.out)
    for f in files:
        _write(out, f.path, f.content, int(f.permissions, 8))
    _write(out, "user-data.yaml", user_data, 0o600)
    what = (f"a self-healing pool node (nodes 1..{plan.nodes - 1} boot the same files; the rendezvous gives the rank)"
            if plan.elastic and rank else f"node {args.rank} of {plan.nodes}")
    print(f"{plan.name} {what}: {len(files)} files and user-data.yaml in {out}")
    return 0
