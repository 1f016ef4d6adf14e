"""The Pulumi project and policy-pack files as the real CLI validates them (no CLI here).

The rules mirror pulumi's own project validation (sdk/go/common/workspace/project.go): a typed
or defaulted config key must be namespaced by the project (or bare); other namespaces may only
carry a value. Stack files may set only declared project keys or provider keys.
"""

import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROJECT = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())


def test_project_file_points_pulumi_at_the_right_places():
    assert PROJECT["name"] == "trainstack"
    assert PROJECT["runtime"]["name"] == "python"
    assert PROJECT["runtime"]["options"]["virtualenv"] == ".venv"
    assert PROJECT["stackConfigDir"] == "stacks" and (ROOT / "__main__.py").exists()


def test_typed_config_keys_are_namespaced_by_the_project():
    for key, decl in PROJECT["config"].items():
        own = ":" not in key or key.startswith(PROJECT["name"] + ":")
        if isinstance(decl, dict) and ("type" in decl or "default" in decl):
            assert own, f"{key}: only project keys may declare a type or default"
            assert decl.get("type") in ("string", "boolean", "integer", "array")


def test_stack_files_set_only_declared_or_provider_keys():
    declared = set(PROJECT["config"])
    for f in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        config = yaml.safe_load(f.read_text())["config"]
        for key in config:
            assert key in declared or not key.startswith("trainstack:"), f"{f.name}: undeclared {key}"
        profile = ROOT / "stacks" / config["trainstack:profile"]
        assert profile.exists(), f"{f.name}: {profile} is missing"


def test_policy_pack_project_is_python_with_its_own_virtualenv():
    pack = yaml.safe_load((ROOT / "policies" / "PulumiPolicy.yaml").read_text())
    runtime = pack["runtime"]
    assert (runtime if isinstance(runtime, str) else runtime["name"]) == "python"
    reqs = (ROOT / "policies" / "requirements.txt").read_text()
    assert "pulumi-policy==1.21" in reqs and "-e .." in reqs
