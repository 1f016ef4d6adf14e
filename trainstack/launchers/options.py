"""A launch tool's documented options (``data/<tool>.yaml``) and a scanner that splits a
command line into the tool's options and the program it runs, the way argparse does for
these tools: options first, then the script and everything after it, which is the script's.

The data files are written from each tool's own parser by ``tests/launch/tool_parsers.py``
and checked against it by ``make test-launch``; each names its package version and source.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..datafile import load_data_yaml

DATA = Path(__file__).with_name("data")


@dataclass(frozen=True)
class ToolFacts:
    tool: str
    package: str
    version: str
    source: str
    options: dict[str, tuple[str, bool]]  # every spelling -> (canonical name, takes a value)
    allow_abbrev: bool = True

    def canonical(self, name: str) -> Optional[tuple[str, bool]]:
        """``name`` as the tool reads it: exact, or (argparse ``allow_abbrev``) a unique prefix."""
        if name in self.options:
            return self.options[name]
        if self.allow_abbrev and name.startswith("--"):
            hits = {self.options[k] for k in self.options if k.startswith(name)}
            if len(hits) == 1:
                return hits.pop()
        return None


@functools.lru_cache(maxsize=None)
def data(tool: str) -> dict:
    return load_data_yaml(DATA / f"{tool}.yaml")


@functools.lru_cache(maxsize=None)
def facts(tool: str) -> ToolFacts:
    doc = data(tool)
    options: dict[str, tuple[str, bool]] = {}
    for entry in doc["options"]:
        names = list(entry["names"])
        canonical = next((n for n in names if n.startswith("--")), names[0])
        for n in names:
            options[n] = (canonical, bool(entry["value"]))
    return ToolFacts(doc["tool"], doc["package"], str(doc["version"]), doc["source"], options,
                     bool(doc.get("allow_abbrev", True)))


@dataclass(frozen=True)
class Option:
    canonical: str           # the tool's own long name, e.g. --nproc-per-node
    words: tuple[str, ...]   # exactly as written (one word, or the option and its value)
    value: Optional[str] = None

    @property
    def given(self) -> str:
        return " ".join(self.words)


@dataclass(frozen=True)
class Scan:
    options: tuple[Option, ...]
    program: tuple[str, ...]            # the script and its arguments
    unknown: tuple[str, ...] = ()       # bare options the tool does not document
    missing_value: Optional[str] = None  # an option at the end that needs a value

    def find(self, *canonical: str) -> list[Option]:
        return [o for o in self.options if o.canonical in canonical]


def scan(words: tuple[str, ...], tool: ToolFacts) -> Scan:
    """Split ``words`` (what follows the tool's name) into its options and the program."""
    options: list[Option] = []
    unknown: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or word == "-":
            break
        name, eq, value = word.partition("=")
        known = tool.canonical(name)
        if known is None and not eq and word.startswith("-") and not word.startswith("--") and len(word) > 2:
            known_short = tool.canonical(word[:2])  # -m2 style: short option glued to its value
            if known_short and known_short[1]:
                options.append(Option(known_short[0], (word,), word[2:]))
                i += 1
                continue
        if known is None:
            if not eq:
                unknown.append(word)
            options.append(Option(name, (word,), value if eq else None))
            i += 1
            continue
        canonical, takes_value = known
        if eq:
            options.append(Option(canonical, (word,), value))
            i += 1
        elif takes_value:
            if i + 1 >= len(words):
                return Scan(tuple(options), (), tuple(unknown), missing_value=word)
            options.append(Option(canonical, (word, words[i + 1]), words[i + 1]))
            i += 2
        else:
            options.append(Option(canonical, (word,)))
            i += 1
    return Scan(tuple(options), tuple(words[i:]), tuple(unknown))
