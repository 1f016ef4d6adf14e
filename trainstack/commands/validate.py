"""`trainstack validate PROFILE`: exit 0, or exit 2 with one line per problem."""

from __future__ import annotations

import json
import sys

from ..catalog import load_catalog
from ..profile import load_profile
from ..resolver import check_catalog_names


def register(sub) -> None:
    p = sub.add_parser("validate", help="check a training profile")
    p.add_argument("profile", help="path to a profile YAML")
    p.add_argument("--json", action="store_true", help="print the normalised profile as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    profile = load_profile(args.profile)
    warnings = check_catalog_names(profile, load_catalog(), file=args.profile)
    for w in warnings:
        print(f"warning: {w.render()}", file=sys.stderr)
    if args.json:
        print(json.dumps({"valid": True, "warnings": [w.to_dict() for w in warnings],
                          "profile": profile.model_dump(mode="json")}, indent=2))
    else:
        arch = profile.architecture
        print(f"{args.profile}: ok ({profile.name}: {profile.model.label}, {arch.params / 1e9:.2f}B params, "
              f"{profile.training.method}, {profile.training.precision}, region {profile.region})")
    return 0
