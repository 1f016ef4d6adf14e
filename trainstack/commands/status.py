"""`trainstack status PROFILE|--stack NAME [--json] [--watch [SECONDS]]`: a live view of a run.

Reads what the run says about itself and what the cloud says about it: ECS plans, the nodes
(DescribeInstances by the stack's tags) and their heartbeats in the stack bucket
(``status/<node>/heartbeat.json``, written every minute by each node, docs/status.md); DLC plans,
the job (GetJob; ListJobs finds the newest job named after the plan unless ``--dlc-job-id``).
Prints job state and progress, measured speed and memory beside the plan's prediction, spend so
far (an estimate, with its price source), the ETA against the deadline and the projected total
against the budget. ``--json`` is the stable contract of docs/status.md (docs/status.schema.json);
``--watch`` repeats every SECONDS (default 60; one JSON document a line with ``--json``) until the
run is over or Ctrl-C.

Exit codes: 0 the status was read (whatever the job's state); 2 bad input; 5 no credentials or an
API error.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..errors import InputError, Problem

#: --watch bounds: slower than once a minute is a choice, faster than every 5 s only costs API calls.
WATCH_MIN_SECONDS, WATCH_MAX_SECONDS = 5.0, 3600.0


def register(sub) -> None:
    p = sub.add_parser("status", help="a live view of a run: progress, real speed, money spent, ETA and budget",
                       description="Progress, measured speed and memory against the plan, spend so far, ETA and "
                                   "projected cost of a deployed run. Needs Alibaba Cloud credentials (exit 5 "
                                   "without). --json: the contract of docs/status.md.")
    p.add_argument("profile", nargs="?", help="path to a profile YAML (not needed with --stack)")
    p.add_argument("--stack", help="a stack name: stacks/Pulumi.<NAME>.yaml")
    p.add_argument("--json", action="store_true", help="print the JSON contract (docs/status.md)")
    p.add_argument("--watch", nargs="?", const=60.0, type=float, metavar="SECONDS",
                   help="repeat every SECONDS (default 60) until the run is over or Ctrl-C")
    p.add_argument("--dlc-job-id", metavar="ID", help="DLC plans: the job to read (default: the newest job "
                                                      "named after the plan)")
    p.set_defaults(func=run)


@dataclass
class Cloud:
    """Where the observations come from; tests replace the factories with fakes."""

    credentials: Callable[[], Any] = field(default=lambda: _require_credentials())
    ecs: Callable[[str], Any] = field(default=lambda region: _ecs_client(region))
    dlc: Callable[[str], Any] = field(default=lambda region: _dlc_client(region))
    oss: Callable[[str], Any] = field(default=lambda region: _oss_reader(region))
    sleep: Optional[Callable[[float], None]] = None


def _require_credentials() -> Any:
    # the cloud adapters (and their SDKs) load only when this command calls the cloud
    from ..cloud.credentials import require_credentials

    return require_credentials()


def _ecs_client(region: str) -> Any:
    # the cloud adapters (and their SDKs) load only when this command calls the cloud
    from ..cloud.ecs import make_client

    return make_client(region)


def _dlc_client(region: str) -> Any:
    # the cloud adapters (and their SDKs) load only when this command calls the cloud
    from ..cloud.dlc import default_client

    return default_client(region)


def _oss_reader(region: str) -> Any:
    # the cloud adapters (and their SDKs) load only when this command calls the cloud
    from ..cloud.oss import OssReader, make_client

    return OssReader(make_client(region), region)


#: the cloud `trainstack status` and `calibrate` read; replaced in tests
CLOUD = Cloud()


@dataclass
class Observed:
    heartbeats: list = field(default_factory=list)
    instances: list = field(default_factory=list)
    dlc: Any = None
    refused: list[str] = field(default_factory=list)  # heartbeats that failed validation, with why


def read_heartbeats(plan, cloud: Cloud, observed: Observed) -> None:
    # bootstrap/, status/ and the cloud adapters (and their SDKs) load only when heartbeats are read
    from ..bootstrap.heartbeat import has_status, status_prefix
    from ..cloud.oss import read_heartbeats as read_objects
    from ..status import HeartbeatError, parse_heartbeat

    if not has_status(plan):
        return
    bucket = plan.storage.oss.bucket
    pooled = (plan.pool_node_name(),) if plan.elastic else ()
    for key, data in read_objects(cloud.oss(plan.region), bucket, status_prefix(plan), pooled).items():
        try:
            observed.heartbeats.append(parse_heartbeat(data, f"oss://{bucket}/{key}"))
        except HeartbeatError as exc:
            observed.refused.append(str(exc))


def observe(plan, cloud: Cloud, dlc_job_id: Optional[str] = None) -> Observed:
    """Everything the cloud says about the run (credentials first: exit 5 without)."""
    cloud.credentials()
    observed = Observed()
    if plan.target == "ecs":
        # the cloud adapters (and their SDKs) load only when this command calls the cloud
        from ..cloud.ecs import describe_stack_instances

        observed.instances = describe_stack_instances(cloud.ecs(plan.region), plan.region, plan.name, sleep=cloud.sleep)
        read_heartbeats(plan, cloud, observed)
    else:
        # the cloud adapters (and their SDKs) load only when this command calls the cloud
        from ..cloud.dlc import find_job, observe_job

        client = cloud.dlc(plan.region)
        workspace = plan.dlc.workspace_id if plan.dlc else None
        job_id = dlc_job_id or find_job(client, plan.region, plan.name, workspace, sleep=cloud.sleep)
        if job_id:
            observed.dlc = observe_job(client, plan.region, job_id, sleep=cloud.sleep)
    return observed


def current_view(profile, plan, cloud: Cloud, dlc_job_id: Optional[str] = None, now: Optional[float] = None):
    # status/ loads only when a run is read
    from ..status import build_view, prediction_for

    observed = observe(plan, cloud, dlc_job_id)
    view = build_view(profile, plan, prediction_for(profile, plan), heartbeats=observed.heartbeats,
                      instances=observed.instances, dlc=observed.dlc, now=now)
    if observed.refused:
        view = view.model_copy(update={"labels": view.labels + [f"refused: {r}" for r in observed.refused]})
    return view


def _interval(value: Optional[float]) -> Optional[float]:
    if value is None:
        return None
    if not (value == value and WATCH_MIN_SECONDS <= value <= WATCH_MAX_SECONDS):
        raise InputError(f"--watch {value} is out of range", problems=[Problem(
            path="--watch", message=f"seconds between refreshes, {WATCH_MIN_SECONDS:g} to {WATCH_MAX_SECONDS:g}",
            given=value, has_given=True)])
    return float(value)


def run(args, cloud: Optional[Cloud] = None, sleep: Callable[[float], None] = time.sleep) -> int:
    # status/ and the run loader (it reads stacks through preview/) load only when a run is read
    from ..status.render import render_text
    from ..status.view import is_terminal
    from ._run_source import load_run

    cloud = cloud or CLOUD
    interval = _interval(args.watch)
    profile, plan, _ = load_run(args.profile, args.stack, "status")
    if args.dlc_job_id and plan.target != "dlc":
        raise InputError("--dlc-job-id is for DLC plans; this plan runs on ECS nodes")
    try:
        while True:
            view = current_view(profile, plan, cloud, args.dlc_job_id)
            if args.json:
                doc = view.model_dump(mode="json")
                print(json.dumps(doc, separators=(",", ":")) if interval else json.dumps(doc, indent=2))
            else:
                if interval:
                    print("=" * 72)
                sys.stdout.write(render_text(view))
            sys.stdout.flush()
            if interval is None or is_terminal(view):
                return 0
            sleep(interval)
    except KeyboardInterrupt:
        return 0
