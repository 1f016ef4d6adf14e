"""`trainstack schema`: the profile's JSON Schema, for editors and CI."""

from __future__ import annotations

import json

from ..outputs import add_out_argument, emit
from ..profile import profile_json_schema


def register(sub) -> None:
    p = sub.add_parser("schema", help="print the profile JSON Schema")
    add_out_argument(p)
    p.set_defaults(func=run)


def run(args) -> int:
    text = json.dumps(profile_json_schema(), indent=2, sort_keys=True) + "\n"

    emit(args, text)
    return 0
