"""The alerts rules of the rule book (profile ``alerts``, docs/alerts.md): one verdict for validate,
resolve, plan and the Pulumi program.

A webhook is an internet endpoint, and a node reaches the internet only through the NAT gateway
(``network.internet_egress: true``) or a forward proxy the profile names inside the VPC
(``alerts.relay``); without either, every post would time out, so the profile is refused (exit 2)
rather than deployed with alerts that cannot arrive. PAI-DLC runs no trainstack node agent: a DLC
plan with alerts is refused too, pointing at PAI's own event notifications.
"""

from __future__ import annotations

import ipaddress
from typing import Optional

from ..errors import Problem
from ..plan import Plan
from ..profile import TrainingProfile

#: PAI workspace event notifications (EventBridge; DingTalk, WeCom, Lark, email, ...) for DLC jobs: job
#: progress (starts running, fails, finishes), automatic fault tolerance, timeouts, preemption:
#: https://www.alibabacloud.com/help/en/pai/configure-notification-on-job-status-changes
PAI_NOTIFICATIONS = "https://www.alibabacloud.com/help/en/pai/configure-notification-on-job-status-changes"
DLC_MESSAGE = ("alerts are posted by trainstack's node agent, and a PAI-DLC job runs none; PAI notifies DLC job "
               "events itself (workspace event notification rules: DingTalk, WeCom, Lark, email; " + PAI_NOTIFICATIONS
               + ")")


def _dlc(path: str = "alerts") -> Problem:
    return Problem(path=path, message=DLC_MESSAGE, allowed="no alerts with resources.target: dlc (use PAI's "
                                                           "notification rules), or resources.target: ecs")


def alerts_profile_problems(profile: TrainingProfile) -> list[Problem]:
    """A profile's alerts that could never post: no way out of the VPC, a relay outside it, or a DLC target."""
    a = profile.alerts
    if a is None:
        return []
    out: list[Problem] = []
    if profile.resources.target == "dlc":
        out.append(_dlc())
    relay = a.relay_address()
    if relay is None and not profile.network.internet_egress:
        out.append(Problem(
            path="alerts", message="alerts post to a webhook on the internet, and the nodes have no way out: "
                                   "network.internet_egress is false and alerts.relay is not set",
            allowed="network.internet_egress: true (a NAT gateway), or alerts.relay: an HTTP(S) forward proxy "
                    f"inside network.vpc_cidr {profile.network.vpc_cidr} (IPv4:port)"))
    if relay is not None and ipaddress.ip_address(relay[0]) not in ipaddress.ip_network(profile.network.vpc_cidr):
        out.append(Problem(path="alerts.relay", given=a.relay, has_given=True,
                           message=f"the relay is not inside network.vpc_cidr {profile.network.vpc_cidr}: the nodes "
                                   "reach nothing else without internet egress",
                           allowed=f"an address of {profile.network.vpc_cidr} and a port"))
    return out


def alerts_plan_problems(plan: Plan) -> list[Optional[Problem]]:
    """A plan that resolved to PAI-DLC (``target: auto``) with alerts: nothing would post them."""
    if plan.job.alerts is not None and plan.target == "dlc":
        return [_dlc()]
    return []
