"""Security group rules: SSH (port 22, or all ports) never open to the internet at large."""

from __future__ import annotations

import ipaddress
from typing import Any, Iterator, Optional, Sequence

from ...catalog import Catalog
from ...cidrs import ssh_source_problem
from ..stack_view import IngressRule
from . import Finding
from .values import as_str


def opens_port(port_range: Any, port: int) -> Optional[str]:
    """How a ``"from/to"`` range exposes ``port`` ("port 22", "all ports", ...), else ``None``."""
    text = as_str(port_range) or "-1/-1"
    try:
        low, high = (int(x) for x in text.split("/", 1))
    except ValueError:
        return None
    if (low, high) == (-1, -1) or (low <= 1 and high >= 65535):
        return f"all ports ({text})"
    if low <= port <= high:
        return f"port {port}" if low == high else f"ports {text} (including {port})"
    return None


def source_problem(cidr: Any) -> Optional[str]:
    """Why this rule's source must not reach SSH (trainstack.cidrs: the profile's rule), or None."""
    text = as_str(cidr)
    if text is None or not text.strip():
        return None
    try:
        ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return None  # not a CIDR the provider would accept; nothing to judge
    return ssh_source_problem(text)


def no_public_ssh(rules: Sequence[IngressRule], settings: dict, cat: Catalog) -> Iterator[Finding]:
    for r in rules:
        if (r.direction or "").lower() != "ingress" or (r.policy or "accept").lower() != "accept":
            continue
        protocol = (r.protocol or "").lower()
        if protocol not in ("tcp", "all"):
            continue
        exposed = "all ports" if protocol == "all" else opens_port(r.port_range, 22)
        if exposed is None:
            continue
        for _, cidr in r.sources:
            problem = source_problem(cidr)
            if problem:
                yield Finding(f"{r.resource}: ingress rule opens {exposed} to {as_str(cidr)}: {problem}; SSH must "
                              "not be reachable from the internet at large: restrict it to your networks (profile "
                              "access.ssh_cidrs) or use a bastion", r.resource)
