"""Issue 36 item 3: `node-files` and `plan` derive every name from the same functions.

For every sample stack and every node kind it has (plain nodes, an on-demand anchor, a pool node),
the files `node-files` writes are compared with the offline plan's resources: the user data byte for
byte (its digest in the plan document), the stack bucket, every ``oss://`` URI and the object keys
the program writes, the node and pool names. A stack with ``trainstack:storageGeneration`` in a
project of its own shows the generation reaches both."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from trainstack.cli import main
from trainstack.preview.values import shorten

ROOT = Path(__file__).resolve().parents[2]
STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
BUCKET = "alicloud:oss/bucket:Bucket"
OBJECT = "alicloud:oss/bucketObject:BucketObject"
NODES = {"alicloud:ecs/instance:Instance", "alicloud:ess/scalingConfiguration:ScalingConfiguration"}


def _plan(capsys, stack: str) -> dict:
    assert main(["plan", "--stack", stack, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _node_files(capsys, tmp_path: Path, stack: str, rank: int) -> Path:
    out = tmp_path / f"{stack}-{rank}"
    assert main(["node-files", "--stack", stack, "--rank", str(rank), "--out", str(out)]) == 0
    capsys.readouterr()
    return out


def _env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if re.match(r"^[A-Z_]+=", line))


def _digest(user_data: str) -> str:
    """The plan document's form of a node's ``userData`` input (base64 of the cloud-config, shortened)."""
    return shorten(base64.b64encode(user_data.encode()).decode("ascii"))


def compare(doc: dict, out: Path, node: dict) -> None:
    """Every name in one node's files against the plan document's resources."""
    env = _env(out / "etc/trainstack/node.env")
    (bucket,) = [r["inputs"]["bucket"] for r in doc["resources"] if r["type"] == BUCKET]
    assert env["STACK_BUCKET"] == bucket == doc["exports"]["oss_bucket"]
    keys = {r["inputs"]["key"] for r in doc["resources"] if r["type"] == OBJECT}
    assert {r["inputs"]["bucket"] for r in doc["resources"] if r["type"] == OBJECT} == {bucket}
    assert env["JOB_SETTINGS_URI"].removeprefix(f"oss://{bucket}/") in keys
    programs = env["PROGRAMS_URI"].removeprefix(f"oss://{bucket}/")
    assert programs != env["PROGRAMS_URI"] and any(k.startswith(programs) for k in keys)
    assert env["NODE_NAME"] == node["inputs"]["instanceName"] == node["inputs"]["hostName"]
    assert env["STATUS_URI"] == f"oss://{bucket}/status/{env['NODE_NAME']}/"
    assert env["NAME"] == doc["plan"]["name"] and env["INSTANCE_TYPE"] == node["inputs"]["instanceType"]
    for f in [*(out / "etc").rglob("*"), out / "user-data.yaml"]:  # no other bucket in any rendered value
        if f.is_file():
            for named in re.findall(r"oss://([a-z0-9][a-z0-9-]{1,61}[a-z0-9])/", f.read_text()):
                assert named == bucket or named in json.dumps(doc["profile"]), (f, named)
    assert _digest((out / "user-data.yaml").read_text()) == node["inputs"]["userData"]


@pytest.mark.parametrize("stack", STACKS)
def test_node_files_name_what_the_plan_declares(stack, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    doc = _plan(capsys, stack)
    if doc["plan"]["target"] == "dlc":
        out = tmp_path / "dlc"
        assert main(["node-files", "--stack", stack, "--out", str(out)]) == 0
        command = (out / "pai-dlc/user-command.sh").read_text().splitlines()[-1]
        assert command == doc["dlc_request"]["body"]["UserCommand"]
        return
    nodes = sorted((r for r in doc["resources"] if r["type"] in NODES), key=lambda r: r["name"])
    assert nodes
    for node in nodes:
        pool = node["type"] != "alicloud:ecs/instance:Instance"
        rank = (1 if doc["plan"]["spot_pool"]["anchor"] else 0) if pool else int(node["name"].rsplit("-", 1)[1])
        compare(doc, _node_files(capsys, tmp_path, stack, rank), node)


def test_the_storage_generation_reaches_node_files_as_it_reaches_the_program(capsys, tmp_path, monkeypatch):
    project = tmp_path / "project"
    stacks = project / "stacks"
    (stacks / "profiles").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text() + "main: program\n")
    (project / "program").mkdir()
    (project / "program" / "__main__.py").write_text(
        f"import sys\nfrom pathlib import Path\nsys.path.insert(0, {str(ROOT)!r})\n"
        "from components.program import run_program\nrun_program(root=Path(__file__).resolve().parents[1])\n")
    shutil.copy(ROOT / "stacks/profiles/llama3-8b-lora.yaml", stacks / "profiles" / "lora.yaml")
    for generation in ("1", "3"):
        (stacks / f"Pulumi.gen{generation}.yaml").write_text(
            f"config:\n  trainstack:profile: profiles/lora.yaml\n  trainstack:storageGeneration: '{generation}'\n")
    monkeypatch.chdir(project)
    buckets = []
    for stack in ("gen1", "gen3"):
        doc = _plan(capsys, stack)
        (node,) = [r for r in doc["resources"] if r["type"] in NODES]
        compare(doc, _node_files(capsys, tmp_path, stack, 0), node)
        buckets.append(doc["exports"]["oss_bucket"])
    assert buckets[0] != buckets[1]  # the generation is part of the name, in both


def test_an_account_id_names_the_bucket_as_a_real_deploy_does(capsys, tmp_path, monkeypatch):
    from trainstack.layout.storage import StackIdentity, stack_bucket_name

    monkeypatch.chdir(ROOT)
    out = tmp_path / "acct"
    assert main(["node-files", "--stack", "llama3-8b-lora", "--account-id", "1234567890123456", "--out", str(out)]) == 0
    expected = stack_bucket_name("llama3-8b-lora", StackIdentity(region="cn-shenzhen", account_id="1234567890123456",
                                                                  project="trainstack", stack="llama3-8b-lora"))
    assert _env(out / "etc/trainstack/node.env")["STACK_BUCKET"] == expected
    assert main(["node-files", "--stack", "llama3-8b-lora", "--account-id", "x; rm", "--out", str(tmp_path / "b")]) == 2
    assert "--account-id" in capsys.readouterr().err and not (tmp_path / "b").exists()


def test_the_plan_documents_user_data_digest_is_the_shortened_base64():
    text = "#cloud-config\n" + "x" * 5000
    digest = hashlib.sha256(base64.b64encode(text.encode()).decode().encode()).hexdigest()[:16]
    assert _digest(text).endswith(f"sha256:{digest})")
