"""`trainstack node-files PROFILE | --stack NAME [--rank N] --out DIR`: every file a training
node receives, exactly as rendered, under DIR at its path on the node: what its user data writes
(DIR/etc/trainstack/node.env, DIR/usr/local/sbin/trainstack-boot, ...), the node programs it
installs from the stack bucket (DIR/usr/local/lib/trainstack/trainstack-launch.sh, ..., with their
manifest programs.json) and its job settings, with their modes, plus DIR/user-data.yaml (the whole
cloud-config). Read and shellcheck what will run as root before `pulumi up`; the tests source and
run these files in a sandbox.

A PAI-DLC plan has no node files: DIR/pai-dlc/user-command.sh is the command each pod runs.
The CPFS export address exists only after deploy; ``--cpfs-mount-address`` gives the real one,
otherwise a placeholder stands in. Every name (the stack bucket, node and pool names, object keys)
comes from the functions the program uses, so the files match ``trainstack plan``'s resources
(tests/commands/test_node_files_names.py); ``--account-id`` names the bucket as a real deploy will.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError, Problem

CPFS_PLACEHOLDER = "cpfs-known-after-deploy.invalid:/share"


def register(sub) -> None:
    p = sub.add_parser("node-files", help="write the files a node receives, exactly as rendered")
    p.add_argument("profile", nargs="?", help="path to a profile YAML (not needed with --stack)")
    p.add_argument("--stack", help="a stack name: stacks/Pulumi.<NAME>.yaml")
    p.add_argument("--rank", type=int, default=0, help="the node (0-based; default 0)")
    p.add_argument("--out", required=True, help="a new or empty directory to write into")
    p.add_argument("--cpfs-mount-address", help="the CPFS protocol mount target, if known (default: a placeholder)")
    p.add_argument("--account-id", help="the account that deploys the stack, for the stack bucket's real name "
                                        "(default: the offline preview's stand-in account, as `plan` shows)")
    p.set_defaults(func=run)


def _plan(args):
    """The plan as the program completes it before it renders a node's files: the same stack config
    pipeline (stack_config.stack_plan: profile, overrides, policy config), then the stack bucket's name
    from the one function the program uses (layout.storage.with_stack_bucket) over the same project,
    stack and trainstack:storageGeneration; the account is the offline preview's stand-in (what `plan`
    shows) unless ``--account-id`` names the real one."""
    import contextlib

    from ..layout.storage import StackIdentity, with_stack_bucket
    from ..preview.cloud import FAKE_ACCOUNT_ID
    from ..preview.sources import find_project, stack_config
    from ..stack_config import stack_plan, trusted_profile

    if bool(args.profile) == bool(args.stack):
        raise InputError("give a PROFILE path or --stack NAME" if not args.profile
                         else "give either a PROFILE path or --stack NAME, not both")
    account = _account_id(getattr(args, "account_id", None))
    project = find_project()
    trust = contextlib.nullcontext()
    if args.stack:
        config, secret_keys = stack_config(project, args.stack)
    else:
        path = Path(args.profile)
        if not path.is_file():
            raise InputError(f"{args.profile}: no such profile file")
        config = dict(project.defaults, **{f"{project.name}:profile": str(path.resolve())})
        secret_keys = ()
        trust = trusted_profile(path)  # a profile named on the command line may live anywhere (as for `plan`)
    with trust:
        inputs, plan = stack_plan(config, project.name, project.root, secret_keys)
    # `plan PROFILE` records the program as the stack named after the profile (preview.planner)
    identity = StackIdentity(region=plan.region, account_id=account or FAKE_ACCOUNT_ID, project=project.name,
                             stack=args.stack or plan.name, generation=inputs.generation)
    return with_stack_bucket(plan, identity)


def _account_id(value):
    """``--account-id``: an Alibaba Cloud account id (digits), or None."""
    if value is None:
        return None
    if not (isinstance(value, str) and value.isdigit() and len(value) <= 32):
        raise InputError(f"--account-id {value!r} is not an Alibaba Cloud account id",
                         problems=[Problem(path="--account-id", message="must be the account's numeric id",
                                           given=value, has_given=True, allowed="digits, e.g. 1234567890123456")])
    return value


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
    from ..bootstrap import render_files, render_user_data
    from ..dlc_job import job_inputs

    from ..progress import step

    with step("node-files: planning"):
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
    with step("node-files: rendering"):  # a big cluster's job settings hold every rank
        files = render_files(plan, rank, cpfs_mount_address=cpfs)  # refuses before anything is written
        user_data = render_user_data(plan, rank, cpfs_mount_address=cpfs)
    out = _out_dir(args.out)
    with step("node-files: writing", total=len(files) + 1) as progress:
        for f in files:
            _write(out, f.path, f.content, int(f.permissions, 8))
            progress.advance()
        _write(out, "user-data.yaml", user_data, 0o600)
        progress.advance()
    what = (f"a self-healing pool node (nodes 1..{plan.nodes - 1} boot the same files; the rendezvous gives the rank)"
            if plan.elastic and rank else f"node {args.rank} of {plan.nodes}")
    print(f"{plan.name} {what}: {len(files)} files and user-data.yaml in {out}")
    if plan.storage.oss is not None and not args.account_id:
        print(f"stack bucket {plan.storage.oss.bucket}: named as `trainstack plan` names it (offline stand-in "
              "account); --account-id gives the name `pulumi up` will use")
    return 0
