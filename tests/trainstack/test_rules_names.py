"""Names trainstack derives from ``name`` (host and instance names of every node) are checked at the
profile edge, with Alibaba's rules from data/service_limits.yaml (ECS-SDK): `validate` refuses what
`plan` would, with the same message (the one rule book)."""

from __future__ import annotations

import pytest
import yaml

from trainstack.cli import main
from trainstack.rules import derived_names

BASE = {"region": "cn-shenzhen", "model": {"preset": "llama-3.2-1b"},
        "training": {"method": "lora", "precision": "bf16", "tokens": 1.0e7},
        "resources": {"target": "ecs", "gpus": 1, "spot": "never"}}


def _run(tmp_path, capsys, command, profile):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(profile), encoding="utf-8")
    code = main([command, str(path)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("name,why", [
    ("a" * 58, "characters; ECS takes at most 64"),  # 58 + "-node-0" = 65
    ("team--llama", "single '-'"),  # no two hyphens in a row: the profile's own DNS-label rule already
])
def test_a_name_whose_host_names_break_ecs_rules_is_refused_by_validate_and_plan_alike(tmp_path, capsys, name, why):
    profile = dict(BASE, name=name)
    v_code, v_err = _run(tmp_path, capsys, "validate", profile)
    p_code, p_err = _run(tmp_path, capsys, "plan", profile)
    assert v_code == p_code == 2
    assert why in v_err and why in p_err and "name" in v_err


def test_the_last_node_of_max_nodes_decides_and_a_short_name_passes(tmp_path, capsys):
    name = "a" * 57  # 57 + "-node-0" = 64 fits; 57 + "-node-11" = 65 does not
    profile = dict(BASE, name=name, resources=dict(BASE["resources"], max_nodes=12))
    assert derived_names(parse(profile))["host name"] == f"{name}-node-11"
    code, err = _run(tmp_path, capsys, "validate", profile)
    assert code == 2 and "node 11" in err and "at most 56 characters" in err
    assert _run(tmp_path, capsys, "validate", dict(BASE, name=name))[0] == 0


def parse(profile):
    from trainstack.profile import parse_profile

    return parse_profile(profile)
