"""The topology read off recorded resources: links from dependencies, clusters, eRDMA, storage."""

from __future__ import annotations

from trainstack.preview import topology

VPC, VSW, NODE = topology.VPC, topology.VSWITCH, topology.INSTANCE


def res(type_, name, inputs, deps=()):
    return {"type": type_, "name": name, "urn": f"urn:{type_}::{name}", "inputs": inputs,
            "dependencies": [f"urn:{t}::{n}" for t, n in deps]}


def cluster(nodes, rdma=True):
    out = [res(VPC, "vpc", {"cidrBlock": "10.0.0.0/16"}),
           res(VSW, "vsw", {"cidrBlock": "10.0.0.0/20", "zoneId": "cn-shenzhen-f"}, [(VPC, "vpc")]),
           res(topology.DEPLOYMENT_SET, "ds", {"strategy": "LowLatency"})]
    for i in range(nodes):
        out.append(res(NODE, f"node-{i}", {"instanceType": "ecs.ebmgn7ex.32xlarge", "privateIp": f"10.0.0.{10 + i}",
                                           "networkInterfaceTrafficMode": "HighPerformance" if rdma else "Standard",
                                           "dataDisks": [{"category": "cloud_essd", "performanceLevel": "PL3",
                                                          "size": 2048.0}]},
                       [(VSW, "vsw"), (topology.DEPLOYMENT_SET, "ds")]))
    out.append(res(topology.NAS, "cpfs", {"fileSystemType": "cpfs", "storageType": "advance_200", "capacity": 3600.0}))
    out.append(res(topology.MOUNT_TARGETS[1], "nfs", {}, [(topology.NAS, "cpfs"), (VSW, "vsw")]))
    out.append(res(topology.BUCKET, "ckpt", {"bucket": "ckpt-bucket", "versioning": {"status": "Enabled"}}))
    return out


def test_small_cluster_draws_each_node_with_an_erdma_ring():
    topo = topology.build(cluster(3))
    (box,) = [b for b in topo.boxes if b.kind == "cluster"]
    assert box.lines == ["3 x ecs.ebmgn7ex.32xlarge", "eRDMA · LowLatency deployment set"]
    assert [m.lines[0] for m in box.members] == ["node-0", "node-1", "node-2"]
    rdma = [(link.a, link.b) for link in topo.links if link.label == "eRDMA"]
    assert rdma == [("node0", "node1"), ("node1", "node2"), ("node2", "node0")]
    md = topology.mermaid(topo)
    assert 'subgraph cluster0["3 x ecs.ebmgn7ex.32xlarge<br/>eRDMA · LowLatency deployment set"]' in md
    assert "vpc0 --> vswitch0" in md and "vswitch0 --> cluster0" in md
    assert "vswitch0 -->|mount target| storage0" in md and "cluster0 -. mounts .- storage0" in md
    assert 'storage1[("OSS ckpt-bucket<br/>versioned")]' in md


def test_large_cluster_collapses_into_one_box():
    topo = topology.build(cluster(512))
    (box,) = [b for b in topo.boxes if b.kind == "cluster"]
    assert box.members == []
    assert box.lines[:3] == ["512 x ecs.ebmgn7ex.32xlarge", "eRDMA · LowLatency deployment set", "node-0 … node-511"]
    assert "10.0.0.10 … 10.0.2.9" not in box.lines  # (IPs are the recorded ones, not computed)
    md = topology.mermaid(topo)
    assert md.count("\n") < 20


def test_text_tree_places_the_cluster_under_its_vswitch():
    lines = topology.text(topology.build(cluster(2, rdma=False)))
    assert lines[0] == "VPC vpc · 10.0.0.0/16"
    assert lines[1] == "└─ vSwitch vsw · 10.0.0.0/20 · cn-shenzhen-f"
    assert lines[2] == "   ├─ 2 x ecs.ebmgn7ex.32xlarge · LowLatency deployment set"
    assert "   │  ├─ node-0 · 10.0.0.10 · ESSD PL3 2048 GiB" in lines
    assert any(line.startswith("2 x ecs.ebmgn7ex.32xlarge → OSS ckpt-bucket") for line in lines)


def test_labels_are_escaped_for_mermaid():
    topo = topology.build([res(VPC, 'a"b<c>', {"cidrBlock": "10.0.0.0/16"})])
    assert 'vpc0["VPC a#quot;b&lt;c&gt;<br/>10.0.0.0/16"]' in topology.mermaid(topo)


def test_no_resources():
    assert topology.text(topology.build([])) == ["(no network or compute resources)"]
