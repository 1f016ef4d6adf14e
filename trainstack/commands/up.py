"""`trainstack up --stack NAME`: preflight and `pulumi up`, moving down the plan's fallback order when a create finds no stock.

A thin wrapper: the loop and its rules are in :mod:`trainstack.commands.up_failover`, the Pulumi
calls in :mod:`trainstack.commands.up_automation` (the Automation API with the user's Pulumi CLI),
the stock reads in :mod:`trainstack.cloud.stock`. This module wires the real ones together: the
stack's config as `trainstack plan --stack` reads it, the rule book for each attempt, ECS for
stock and running nodes, OSS for the nodes' heartbeats. `pulumi up` alone keeps working as before.

Exit codes: 0 deployed; 2 bad input (no such stack, no ``--yes`` without a terminal); 3 no row of
the fallback order could be deployed (every attempt with its cause); 4 a mandatory policy failed;
5 an API, credentials or Pulumi CLI error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

from ..errors import CloudApiError, InputError
from ..plan import Plan

DEFAULT_ATTEMPTS = 3


def register(sub) -> None:
    p = sub.add_parser(
        "up", help="deploy a stack; when a create finds no GPU stock, try the next row of the plan's fallback order",
        description="Run `pulumi up` (with the policy pack) for stacks/Pulumi.NAME.yaml at the first row of the plan's "
                    "fallback order that has stock; on a stock error of a node, remove what the attempt created "
                    "(first deploy only) and try the next row. A stack that has run a job never changes zone. "
                    "Exit 3 when no row could be deployed, 4 on a mandatory policy, 5 on API/credential errors.")
    p.add_argument("--stack", metavar="NAME", required=True, help="the stack (stacks/Pulumi.NAME.yaml)")
    p.add_argument("--max-attempts", type=int, default=DEFAULT_ATTEMPTS, metavar="N",
                   help=f"most `pulumi up` runs (rows without stock are skipped without one; default {DEFAULT_ATTEMPTS})")
    p.add_argument("--policy-config", metavar="FILE", help="policy pack config JSON (as --policy-pack-config)")
    p.add_argument("--yes", action="store_true", help="deploy without asking (needed without a terminal)")
    p.add_argument("--json", action="store_true", help="print the attempts as JSON at the end")
    p.set_defaults(func=run)


class CloudWitness:
    """Has this stack run a job (a heartbeat in its bucket), and which of its nodes run now (ECS)."""

    def __init__(self, region: str):
        self.region = region

    def job_started(self, bucket: str, prefix: str) -> Optional[bool]:
        from ..cloud.oss import HEARTBEAT_OBJECT, OssReader, make_client

        try:
            keys = OssReader(make_client(self.region), self.region).list_keys(bucket, prefix)
        except CloudApiError as err:
            return False if "NoSuchBucket" in err.message else None
        return any(k.endswith("/" + HEARTBEAT_OBJECT) for k in keys)

    def running_nodes(self, plan: Plan) -> list[str]:
        from ..cloud import ecs

        found = ecs.describe_stack_instances(ecs.make_client(plan.region), plan.region, plan.name)
        return sorted(o.name or o.instance_id for o in found if o.status == "Running")


def _stock(plan: Plan) -> Any:
    from ..cloud import ecs
    from ..cloud.stock import StockTable

    return StockTable(ecs.make_client(plan.region), plan.region, spot_duration=plan.spot_duration_hours)


def _confirm(args, stack: str) -> None:
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise InputError("trainstack up deploys real resources; without a terminal pass --yes")
    answer = input(f"Deploy stack {stack} (pulumi up, trying the fallback order on stock errors)? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise InputError("not deployed: answered no")


def same_exceptions(args, config, project, secret_keys) -> None:
    """Exit 2 when ``--policy-config FILE`` makes the resolver plan otherwise than the stack's
    trainstack:policyConfig: the pack reads FILE, but the program `pulumi up` runs resolves under the
    stack's file, so the pack would judge a plan the flag never allowed (or refuse one it did)."""
    if not args.policy_config:
        return
    from ..errors import InfeasibleError, Problem
    from ..rules.policy_config import load_allowances
    from ..stack_config import plan_for_config, policy_config_path

    stack_file = policy_config_path(config, project.name, project.root)
    if load_allowances(args.policy_config).grants() == load_allowances(stack_file).grants():
        return

    def chosen(policy_file):
        try:
            plan = plan_for_config(dict(config), project.name, project.root, secret_keys, policy_file=policy_file)
        except InfeasibleError:
            return None
        # what the program declares from it (the chosen placement), not the candidates it passed over
        return {k: getattr(plan, k) for k in ("target", "instance_type", "nodes", "gpus_per_node", "zone", "spot")}

    # the stack's own file (None: none), then the flag's
    under_stack, under_flag = chosen(stack_file), chosen(Path(args.policy_config))
    if under_stack == under_flag:
        return
    where = (f"the stack's trainstack:policyConfig ({stack_file.relative_to(project.root)})" if stack_file
             else "the stack's config (no trainstack:policyConfig)")

    def said(plan):
        return f"{plan['nodes']} x {plan['instance_type']}" if plan else "nothing (infeasible)"
    why = (f"its PCIe exceptions plan {said(under_flag)}, {where} plans {said(under_stack)}: the program `pulumi up` "
           "runs resolves under trainstack:policyConfig, while the pack would judge it under this file")
    raise InputError(
        f"--policy-config {args.policy_config}: {why}",
        problems=[Problem(path="--policy-config", message=why, given=args.policy_config, has_given=True,
                          allowed=f"a file granting what trainstack:policyConfig grants, or set trainstack:policyConfig "
                                  f"in stacks/Pulumi.{args.stack}.yaml to this file")],
        hint="docs/policies.md, the PCIe exception")


def run(args) -> int:
    from ..preview.sources import find_project, stack_config
    from ..stack_config import plan_for_config
    from .up_automation import AutomationDeployer
    from .up_failover import Failover

    if args.max_attempts < 1:
        raise InputError(f"--max-attempts must be at least 1, got {args.max_attempts}")
    policy_config = Path(args.policy_config).resolve() if args.policy_config else None
    if policy_config is not None and not policy_config.is_file():  # the CLI runs in the project root
        raise InputError(f"--policy-config {args.policy_config}: no such file")
    project = find_project()
    config, secret_keys = stack_config(project, args.stack)  # a missing stack file is exit 2 here
    same_exceptions(args, config, project, secret_keys)
    echo = (lambda line: print(line, file=sys.stderr)) if args.json else print

    def planner(cfg) -> Plan:
        return plan_for_config(dict(cfg), project.name, project.root, secret_keys)

    plan0 = planner(config)
    _confirm(args, args.stack)
    deployer = AutomationDeployer(args.stack, project.root, policy_config=policy_config, echo=echo,
                                  read_config=lambda: stack_config(project, args.stack)[0])
    loop = Failover(args.stack, deployer, _stock(plan0), CloudWitness(plan0.region), planner,
                    max_attempts=args.max_attempts, echo=echo)
    report = loop.run()
    done = report.deployed
    if done is not None:
        pins = {k: v for k, v in deployer.config().items() if k in ("trainstack:zone", "trainstack:instanceType")}
        echo(f"deployed {args.stack}: {done.instance_type} in {done.zone or 'the planned zone'}")
        if pins:
            echo(f"  the stack config records {', '.join(f'{k}={v}' for k, v in pins.items())} in "
                 f"{project.stack_file(args.stack).relative_to(project.root)}: commit it, so every later plan and "
                 "`pulumi up` keeps this placement")
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    return 0
