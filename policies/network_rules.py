"""Security group rules: SSH (port 22, or all ports) never open to the internet at large."""

from __future__ import annotations

import ipaddress
from typing import Any, Optional

# _base before trainstack: from a bare checkout it puts the checkout's trainstack on sys.path
if __package__:
    from ._base import NO_PUBLIC_SSH, level_or_default
    from . import _nodes as N
    from . import _props as P
else:  # run by Pulumi from inside policies/
    from _base import NO_PUBLIC_SSH, level_or_default  # type: ignore[no-redef]
    import _nodes as N  # type: ignore[no-redef]
    import _props as P  # type: ignore[no-redef]

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from trainstack.cidrs import ssh_source_problem


# ---- 5. no-public-ssh -------------------------------------------------------------------------
def _opens_port(port_range: Any, port: int) -> Optional[str]:
    """How a ``"from/to"`` range exposes ``port`` ("port 22", "all ports", ...), else ``None``."""
    text = P.as_str(port_range) or "-1/-1"
    try:
        low, high = (int(x) for x in text.split("/", 1))
    except ValueError:
        return None
    if (low, high) == (-1, -1) or (low <= 1 and high >= 65535):
        return f"all ports ({text})"
    if low <= port <= high:
        return f"port {port}" if low == high else f"ports {text} (including {port})"
    return None


def _ssh_source_problem(cidr: Any) -> Optional[str]:
    """Why this rule's source must not reach SSH (trainstack.cidrs: the profile's rule), or None."""
    text = P.as_str(cidr)
    if text is None or not text.strip():
        return None
    try:
        ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return None  # not a CIDR the provider would accept; nothing to judge
    return ssh_source_problem(text)


def no_public_ssh(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type != N.SECURITY_GROUP_RULE:
            return
        p = P.plain(args.props)
        if (P.as_str(p.get("type")) or "").lower() != "ingress":
            return
        if (P.as_str(p.get("policy")) or "accept").lower() != "accept":
            return
        protocol = (P.as_str(p.get("ipProtocol")) or "").lower()
        if protocol not in ("tcp", "all"):
            return
        exposed = "all ports" if protocol == "all" else _opens_port(p.get("portRange"), 22)
        if exposed is None:
            return
        for key in ("cidrIp", "ipv6CidrIp"):
            problem = _ssh_source_problem(p[key]) if key in p else None
            if problem:
                report(f"{args.name}: ingress rule opens {exposed} to {P.as_str(p[key])}: {problem}; SSH must "
                       "not be reachable from the internet at large: restrict it to your networks (profile "
                       "access.ssh_cidrs) or use a bastion")

    return ResourceValidationPolicy(
        name=NO_PUBLIC_SSH,
        description="Checks whether security group rules open SSH (port 22, or all ports) to the whole "
                    "internet (0.0.0.0/0, ::/0, ::ffff:0.0.0.0/96 and other IPv4-embedding ranges) or to a "
                    "public range wider than /24 (IPv6: /48).",
        validate=validate,
        enforcement_level=level_or_default(NO_PUBLIC_SSH, level),
    )
