"""Security defaults on the resources of every sample stack, read from the offline plan.

What the engine would create for each `stacks/Pulumi.*.yaml`: no public IPs, IMDS tokens
required, encrypted disks and buckets, SSH only from declared CIDRs, intra-cluster traffic only
from the cluster's own security group, checkpoint storage protected, least-privilege RAM
policies, and no credentials anywhere in the output.
"""

from __future__ import annotations

import io
import ipaddress
import json
import contextlib
import pathlib

import pytest
import yaml

from trainstack.cli import main
from trainstack.profile import load_profile

ROOT = pathlib.Path(__file__).resolve().parents[2]
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


@pytest.fixture(scope="module", params=STACKS)
def stack_plan(request):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["plan", "--stack", request.param, "--format", "json"])
    assert code == 0, request.param
    doc = json.loads(out.getvalue())
    config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{request.param}.yaml").read_text())["config"]
    profile = load_profile(ROOT / "stacks" / config["trainstack:profile"])
    return request.param, doc, profile


def of(doc, suffix):
    return [r for r in doc["resources"] if r["type"].endswith(suffix)]


def test_gpu_nodes_have_no_public_ip_and_hardened_metadata(stack_plan):
    _, doc, _ = stack_plan
    for node in of(doc, "ecs/instance:Instance"):
        i = node["inputs"]
        assert i.get("internetMaxBandwidthOut", 0) == 0, node["name"]
        assert i["httpTokens"] == "required", node["name"]
        assert i["systemDiskEncrypted"] is True
        assert all(d["encrypted"] for d in i.get("dataDisks", []))
        assert i["tags"]["trainstack:role"] == "training" and i["tags"]["trainstack:zone"]
    for disk in of(doc, "ecs/ecsDisk:EcsDisk"):
        assert disk["inputs"]["encrypted"] is True


def test_ssh_only_from_declared_cidrs_and_cluster_traffic_from_its_own_group(stack_plan):
    _, doc, profile = stack_plan
    declared = {ipaddress.ip_network(c) for c in profile.access.ssh_cidrs}
    for rule in of(doc, "ecs/securityGroupRule:SecurityGroupRule"):
        i = rule["inputs"]
        if i["type"] != "ingress":
            continue
        if i.get("sourceSecurityGroupId"):
            continue  # intra-cluster: only members of the cluster's own security group
        assert "cidrIp" in i, rule["name"]
        assert ipaddress.ip_network(i["cidrIp"]) in declared, f"{rule['name']} opens {i['cidrIp']}"
        assert i["portRange"] == "22/22"
    if not declared:
        assert all(r["inputs"].get("sourceSecurityGroupId") for r in of(doc, "ecs/securityGroupRule:SecurityGroupRule")
                   if r["inputs"]["type"] == "ingress")


def test_checkpoint_storage_is_encrypted_versioned_private_and_protected(stack_plan):
    _, doc, profile = stack_plan
    buckets = of(doc, "oss/bucket:Bucket")
    for b in buckets:
        i = b["inputs"]
        assert i["serverSideEncryptionRule"]["sseAlgorithm"] in ("AES256", "KMS")
        assert i["versioning"]["status"] == "Enabled"
        if i["tags"]["trainstack:role"] != "checkpoint":
            # the stack bucket of a plan with checkpoints on CPFS or ESSD holds only the job settings and
            # the heartbeats: deleted with the stack (docs/day-two.md, components/storage.py)
            assert profile.storage.checkpoint != "oss" and i["forceDestroy"] and not b["protect"]
            continue
        assert not i.get("forceDestroy")
        assert b["protect"] is profile.storage.retain_on_destroy and b["retain_on_delete"] is profile.storage.retain_on_destroy
    for acl in of(doc, "oss/bucketAcl:BucketAcl"):
        assert acl["inputs"]["acl"] == "private"
    for fs in of(doc, "nas/fileSystem:FileSystem"):
        assert fs["protect"] is True and fs["retain_on_delete"] is True
    ckpt = [r for r in doc["resources"] if (r["inputs"].get("tags") or {}).get("trainstack:role") == "checkpoint"]
    assert ckpt, "some storage holds the checkpoints"


def test_node_role_is_least_privilege(stack_plan):
    _, doc, _ = stack_plan
    for pol in of(doc, "ram/policy:Policy"):
        statements = json.loads(pol["inputs"]["policyDocument"])["Statement"]
        for st in statements:
            resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
            actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
            # the one exception: a node reads its own job-settings tag, and ListTagResources has no
            # resource-level authorization (ECS-TAGLIST, ecs.list_tag_resources.resource_level_authorization)
            assert "*" not in resources or actions == ["ecs:ListTagResources"], pol["name"]
            assert not any(a.endswith(":*") or a == "*" for a in actions), pol["name"]


def test_no_credentials_in_plan_output(stack_plan):
    _, doc, _ = stack_plan
    text = json.dumps(doc)
    assert "LTAI" not in text and "BEGIN RSA PRIVATE KEY" not in text
