"""The training topology read off a plan document: VPC -> vSwitch -> nodes, storage, RDMA links.

Why from the recorded resources (not the Plan): the diagram shows what the program actually
declares. Links come from each registration's dependencies (an input that is another resource's
output), so nothing is inferred from names. Large clusters collapse into one box so a 512-node
diagram stays readable (and under Mermaid's size limits).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..dlc_job import KIND as DLC_KIND
from ..layout.pool_configuration import KIND as POOL_KIND

#: Above this many nodes, the nodes are drawn as one box.
MAX_NODES_DRAWN = 8

VPC = "alicloud:vpc/network:Network"
VSWITCH = "alicloud:vpc/switch:Switch"
INSTANCE = "alicloud:ecs/instance:Instance"
NAT = "alicloud:vpc/natGateway:NatGateway"
NAS = "alicloud:nas/fileSystem:FileSystem"
MOUNT_TARGETS = ("alicloud:nas/mountTarget:MountTarget", "alicloud:nas/protocolService:ProtocolService",
                 "alicloud:nas/protocolMountTarget:ProtocolMountTarget")
BUCKET = "alicloud:oss/bucket:Bucket"
DISK = "alicloud:ecs/ecsDisk:EcsDisk"
DEPLOYMENT_SET = "alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet"
SCALING_GROUP = "alicloud:ess/scalingGroup:ScalingGroup"
SCALING_CONFIGURATION = "alicloud:ess/scalingConfiguration:ScalingConfiguration"


@dataclass
class Box:
    id: str
    kind: str                  # vpc | vswitch | node | cluster | pool | nat | storage | dlc
    lines: list[str]
    members: list["Box"] = field(default_factory=list)  # a cluster's node boxes


@dataclass
class Link:
    a: str
    b: str
    label: str = ""
    style: str = "solid"       # solid | dotted


@dataclass
class Topology:
    boxes: list[Box] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)

    def box(self, box_id: str) -> Box:
        return next(b for b in self._all() if b.id == box_id)

    def _all(self):
        for b in self.boxes:
            yield b
            yield from b.members


def _rdma(inputs: dict) -> bool:
    secondary = inputs.get("networkInterfaces") or {}
    if isinstance(secondary, list):
        secondary = secondary[0] if secondary else {}
    return "HighPerformance" in (inputs.get("networkInterfaceTrafficMode"), secondary.get("networkInterfaceTrafficMode"))


def _gib(v: Any) -> str:
    return f"{float(v):g} GiB" if isinstance(v, (int, float)) else "? GiB"


def _disks(inputs: dict) -> str:
    out = []
    for d in inputs.get("dataDisks") or []:
        cat = str(d.get("category") or "disk").replace("cloud_essd", "ESSD")
        out.append(f"{cat} {d.get('performanceLevel') or ''} {_gib(d.get('size'))}".replace("  ", " "))
    return ", ".join(out)


def build(resources: list[dict]) -> Topology:
    """Topology of a document's ``resources`` (in document order)."""
    topo = Topology()
    ids: dict[str, str] = {}           # urn -> box id
    counters: dict[str, int] = {}

    def add(r: dict, kind: str, lines: list[str]) -> str:
        n = counters.get(kind, 0)
        counters[kind] = n + 1
        box_id = f"{kind}{n}"
        ids[r["urn"]] = box_id
        topo.boxes.append(Box(box_id, kind, lines))
        return box_id

    def up(r: dict, kinds: tuple[str, ...]) -> Optional[str]:
        for dep in r.get("dependencies") or []:
            box = ids.get(dep)
            if box and box.rstrip("0123456789") in kinds:
                return box
        return None

    nodes, mounts, buckets, dlc, pools = [], [], [], [], []
    groups = {r["urn"]: r for r in resources if r["type"] == SCALING_GROUP}
    strategies = {r["urn"]: (r.get("inputs") or {}).get("strategy") for r in resources if r["type"] == DEPLOYMENT_SET}
    for r in resources:
        t, p = r["type"], r.get("inputs") or {}
        if t == VPC:
            add(r, "vpc", [f"VPC {r['name']}", str(p.get("cidrBlock") or "")])
        elif t == VSWITCH:
            box = add(r, "vswitch", [f"vSwitch {r['name']}", f"{p.get('cidrBlock') or ''} · {p.get('zoneId') or ''}"])
            if (vpc := up(r, ("vpc",))):
                topo.links.append(Link(vpc, box))
        elif t == INSTANCE:
            nodes.append(r)
        elif t == SCALING_CONFIGURATION or p.get("kind") == POOL_KIND:  # the provider's, or trainstack's over ESS
            pools.append(r)
        elif t == NAT:
            box = add(r, "nat", [f"NAT gateway {r['name']}", "internet egress (SNAT)"])
            if (vsw := up(r, ("vswitch",))):
                topo.links.append(Link(vsw, box))
        elif t == NAS:
            kind = "CPFS" if p.get("fileSystemType") == "cpfs" else "NAS"
            add(r, "storage", [f"{kind} {r['name']}", f"{p.get('storageType') or ''} {_gib(p.get('capacity'))}".strip()])
        elif t in MOUNT_TARGETS:
            mounts.append(r)
        elif t == BUCKET:
            buckets.append(r)
        elif t == DISK:
            add(r, "storage", [f"disk {r['name']}", f"{p.get('category') or ''} {_gib(p.get('size'))}"])
        elif p.get("kind") == DLC_KIND:
            dlc.append(r)

    clusters = [c for c in [_add_nodes(topo, nodes, ids, up, strategies)] if c]
    for r in dlc:
        p = r["inputs"]
        pods = p.get("pod_count")
        box = add(r, "dlc", [f"PAI-DLC job {r['name']}",
                             f"{pods:g} x {p.get('ecs_spec') or 'quota'}" if isinstance(pods, (int, float))
                             else str(p.get("ecs_spec") or "quota"),
                             "RDMA" if p.get("enable_rdma") else ""])
        if (vsw := up(r, ("vswitch",))):
            topo.links.append(Link(vsw, box))
        clusters.append(box)
    for r in pools:  # an ESS scaling group (self-healing spot pool): vSwitch -> group -> its configuration
        p = r["inputs"]
        group = next((groups[d] for d in r.get("dependencies") or [] if d in groups), None)
        size = (group or {}).get("inputs", {}).get("maxSize")
        limits = [x.get("priceLimit") for x in p.get("spotPriceLimits") or [] if isinstance(x, dict)]
        box = add(r, "pool", [f"ESS spot pool {r['name']}",
                              f"{size:g} x {p.get('instanceType') or 'node'}" if isinstance(size, (int, float))
                              else str(p.get("instanceType") or "node"),
                              f"spot ≤ {limits[0]} CNY/h · replaced when reclaimed" if limits else "",
                              "eRDMA (one ERI per node)" if any(isinstance(n, dict) and n.get(
                                  "networkInterfaceTrafficMode") == "HighPerformance"
                                  for n in p.get("networkInterfaces") or []) else "",
                              _disks(p)])
        if group is not None and (vsw := up(group, ("vswitch",))):
            topo.links.append(Link(vsw, box))
        clusters.append(box)
    for r in mounts:  # vSwitch -> file system, through its mount target / protocol service
        fs, vsw = up(r, ("storage",)), up(r, ("vswitch",))
        if fs and vsw and not any(link.a == vsw and link.b == fs for link in topo.links):
            topo.links.append(Link(vsw, fs, "mount target"))
            topo.links += [Link(c, fs, "mounts", "dotted") for c in clusters]
    for r in buckets:
        box = add(r, "storage", [f"OSS {r['inputs'].get('bucket') or r['name']}",
                                 "versioned" if (r["inputs"].get("versioning") or {}).get("status") == "Enabled" else ""])
        topo.links += [Link(c, box, "internal endpoint", "dotted") for c in clusters]
    return topo


def _add_nodes(topo: Topology, nodes: list[dict], ids: dict[str, str], up,
               strategies: dict[str, Any]) -> Optional[str]:
    """One cluster box for the nodes: their boxes inside (up to MAX_NODES_DRAWN), else a summary."""
    if not nodes:
        return None
    first, last = nodes[0], nodes[-1]
    p = first.get("inputs") or {}
    rdma = any(_rdma(n.get("inputs") or {}) for n in nodes)
    spot = p.get("spotStrategy") not in (None, "NoSpot")
    sets = {strategies[d] or "" for n in nodes for d in n.get("dependencies") or [] if d in strategies}
    placement = f"{'/'.join(sorted(sets))} deployment set".strip() if sets else ""
    title = [f"{len(nodes)} x {p.get('instanceType') or 'node'}",
             " · ".join(x for x in ("eRDMA" if rdma else "", f"spot ≤ {p.get('spotPriceLimit')} CNY/h" if spot else "",
                                    placement) if x)]
    cluster = Box("cluster0", "cluster", title)
    if len(nodes) > MAX_NODES_DRAWN:
        ips = [n["inputs"].get("privateIp") for n in (first, last)]
        cluster.lines += [f"{first['name']} … {last['name']}", f"{ips[0]} … {ips[1]}" if all(ips) else "",
                          _disks(p)]
    else:
        for i, n in enumerate(nodes):
            q = n.get("inputs") or {}
            cluster.members.append(Box(f"node{i}", "node", [n["name"], str(q.get("privateIp") or ""), _disks(q)]))
        if rdma and len(nodes) > 1:
            ring = [b.id for b in cluster.members]
            pairs = list(zip(ring, ring[1:])) + ([(ring[-1], ring[0])] if len(ring) > 2 else [])
            topo.links += [Link(a, b, "eRDMA", "dotted") for a, b in pairs]
    topo.boxes.append(cluster)
    for n in nodes:
        ids[n["urn"]] = cluster.id
    if (vsw := up(first, ("vswitch",))):
        topo.links.append(Link(vsw, cluster.id))
    return cluster.id


# ---- rendering -----------------------------------------------------------------------------------

_SHAPES = {"storage": ('[("', '")]'), "dlc": ('[["', '"]]'), "nat": ('(["', '"])')}


def _escape(text: str) -> str:
    return (text.replace("&", "&amp;").replace('"', "#quot;").replace("<", "&lt;").replace(">", "&gt;"))


def _node_line(b: Box) -> str:
    left, right = _SHAPES.get(b.kind, ('["', '"]'))
    return f"{b.id}{left}{'<br/>'.join(_escape(x) for x in b.lines if x)}{right}"


def _link_line(link: Link) -> str:
    label = _escape(link.label)
    if link.style == "dotted":
        return f"{link.a} -. {label} .- {link.b}" if label else f"{link.a} -.- {link.b}"
    return f"{link.a} -->|{label}| {link.b}" if label else f"{link.a} --> {link.b}"


def mermaid(topo: Topology) -> str:
    """A Mermaid ``flowchart`` (GitHub renders it in markdown); a cluster is a subgraph."""
    lines = ["flowchart LR"]
    inner = {m.id for b in topo.boxes for m in b.members}
    for b in topo.boxes:
        if b.members:
            lines.append(f'  subgraph {b.id}["{"<br/>".join(_escape(x) for x in b.lines if x)}"]')
            lines += [f"    {_node_line(m)}" for m in b.members]
            lines += [f"    {_link_line(k)}" for k in topo.links if k.a in inner and k.b in inner
                      and any(m.id == k.a for m in b.members)]
            lines.append("  end")
        else:
            lines.append(f"  {_node_line(b)}")
    lines += [f"  {_link_line(k)}" for k in topo.links if not (k.a in inner and k.b in inner)]
    return "\n".join(lines)


def text(topo: Topology) -> list[str]:
    """The same picture as an indented tree (for the terminal)."""
    if not topo.boxes:
        return ["(no network or compute resources)"]
    children: dict[str, list[tuple[str, str]]] = {}
    placed: set[str] = set()
    side: dict[tuple[str, str], list[str]] = {}  # (label, target) -> sources
    for link in topo.links:
        if link.style == "solid" and link.b not in placed:
            children.setdefault(link.a, []).append((link.b, link.label))
            placed.add(link.b)
        elif link.label != "eRDMA":
            side.setdefault((link.label, link.b), []).append(link.a)
    out: list[str] = []

    def label(box_id: str) -> str:
        return " · ".join(x for x in topo.box(box_id).lines if x)

    def walk(box_id: str, prefix: str, last: bool, top: bool, how: str) -> None:
        out.append((label(box_id) if top else f"{prefix}{'└─ ' if last else '├─ '}{label(box_id)}")
                   + (f"  (via {how})" if how else ""))
        kids = [(m.id, "") for m in topo.box(box_id).members] + children.get(box_id, [])
        for i, (kid, lab) in enumerate(kids):
            walk(kid, "" if top else prefix + ("   " if last else "│  "), i == len(kids) - 1, False, lab)

    for b in topo.boxes:
        if b.id not in placed:
            walk(b.id, "", True, True, "")
    for (how, target), sources in side.items():
        out.append(f"{', '.join(topo.box(s).lines[0] for s in sources)} → {label(target)}  ({how})")
    return out
