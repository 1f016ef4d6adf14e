"""Check a rendered command line against the options its tool documents (data/<tool>.yaml,
written from the tool's own parser): every option before the program is one the tool has, an
option that takes a value has one, and the values of the topology options are returned for
the test to compare with the plan. ``make test-launch`` runs the tools' real parsers too."""

from __future__ import annotations

from trainstack.launchers.options import facts


def parse(argv: list[str], tool: str) -> tuple[dict[str, str], list[str]]:
    """(options by their long name, the program and its arguments); AssertionError on an
    option the tool does not document or one missing its value."""
    known = facts(tool)
    options: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        name, eq, value = argv[i].partition("=")
        entry = known.options.get(name)
        assert entry is not None, f"{tool} {known.version} has no option {name} ({known.source})"
        canonical, takes_value = entry
        if takes_value and not eq:
            assert i + 1 < len(argv), f"{name} needs a value"
            value, i = argv[i + 1], i + 1
        options[canonical] = value if takes_value else "true"
        i += 1
    return options, argv[i:]
