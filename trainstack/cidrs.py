"""Who may reach SSH: one rule for the profile (``access.ssh_cidrs``) and the ``no-public-ssh`` policy.

An IPv6 range that embeds IPv4 addresses is judged as the IPv4 range it stands for:
``::ffff:0.0.0.0/96`` (IPv4-mapped, RFC 4291 2.5.5.2) is all of IPv4, although Python's
``ipaddress`` calls it private; so are NAT64 ``64:ff9b::/96`` (RFC 6052) and 6to4 ``2002::/16``
(RFC 3056). Public sources may be at most :data:`MAX_PUBLIC_IPV4_ADDRESSES` IPv4 addresses (/24,
an office or VPN egress range) or an IPv6 /48 (one site); private ranges are not limited.
"""

from __future__ import annotations

import ipaddress
from typing import Optional, Union

Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

MAX_PUBLIC_IPV4_PREFIX = 24
MAX_PUBLIC_IPV4_ADDRESSES = 1 << (32 - MAX_PUBLIC_IPV4_PREFIX)
MAX_PUBLIC_IPV6_PREFIX = 48
_EMBEDDING = (
    (ipaddress.IPv6Network("::ffff:0:0/96"), 96, lambda n: int(n) & 0xFFFFFFFF),
    (ipaddress.IPv6Network("64:ff9b::/96"), 96, lambda n: int(n) & 0xFFFFFFFF),
    (ipaddress.IPv6Network("2002::/16"), 16, lambda n: (int(n) >> 80) & 0xFFFFFFFF),
)


def effective_network(net: Network) -> Network:
    """The IPv4 network an IPv4-embedding IPv6 range stands for; other networks as they are."""
    if isinstance(net, ipaddress.IPv6Network):
        for block, bits, extract in _EMBEDDING:
            if net.subnet_of(block):
                prefix = max(0, min(32, net.prefixlen - bits))
                return ipaddress.IPv4Network((extract(net.network_address), prefix), strict=False)
            if block.subnet_of(net):  # wider than the embedding block: covers all of IPv4 at least
                return ipaddress.IPv4Network("0.0.0.0/0")
    return net


def ssh_source_problem(cidr: str) -> Optional[str]:
    """Why ``cidr`` must not reach SSH on GPU nodes, or None when it may."""
    try:
        net = ipaddress.ip_network(str(cidr).strip(), strict=False)
    except ValueError:
        return f"{cidr!r} is not an IPv4 or IPv6 CIDR such as 203.0.113.0/24"
    eff = effective_network(net)
    shown = str(cidr).strip()
    if eff.prefixlen == 0:
        return f"{shown} opens SSH to the whole internet; list your office or VPN CIDRs"
    if eff.is_private:
        return None
    limit = MAX_PUBLIC_IPV4_PREFIX if eff.version == 4 else MAX_PUBLIC_IPV6_PREFIX
    if eff.prefixlen < limit:
        what = f"{eff.num_addresses:,} public addresses" if eff.version == 4 else f"a public /{eff.prefixlen}"
        return (f"{shown} opens SSH to {what}; use a /{limit} or narrower office or VPN range "
                f"(or a bastion in the VPC)")
    return None
