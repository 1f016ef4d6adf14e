"""`trainstack schema`: the profile's JSON Schema, for editors and CI."""

from __future__ import annotations

import json

from ..profile import profile_json_schema


def register(sub) -> None:
    p = sub.add_parser("schema", help="print the profile JSON Schema")
    p.add_argument("--out", help="write to this file instead of stdout")
    p.set_defaults(func=run)


def run(args) -> int:
    text = json.dumps(profile_json_schema(), indent=2, sort_keys=True) + "\n"
    if args.out:
        from ..fsutil import atomic_write_text

        atomic_write_text(args.out, text)
    else:
        print(text, end="")
    return 0
