"""Read one YAML mapping from a file the user gave, within bounds; every failure names the file.

What a profile or stack file may be (checked before or while parsing, never after a blow-up):

* a regular file of at most ``limit`` bytes, UTF-8 (:func:`trainstack.fsutil.read_regular_file`
  refuses FIFOs and devices without reading them);
* nested at most :data:`MAX_DEPTH` levels, and at most :data:`MAX_NODES` values once aliases are
  expanded: the 378-byte "billion laughs" document stops after a few thousand nodes, not minutes
  of CPU; an alias that contains itself is refused;
* mapping keys are single values (``? [a, b]`` and ``{[a]: b}`` are refused), never duplicated
  (PyYAML silently keeps the last);
* only the plain types: mappings, lists, strings, numbers, booleans, null. ``!!binary``, ``!!set``,
  ``!!omap``, ``!!pairs``, ``!!timestamp`` and every other tag are refused; an unquoted date
  stays the string as written (Pulumi hands config values to programs as strings);
* ``5.0e7`` and ``1e9`` are numbers, as YAML 1.2 reads them (PyYAML's YAML 1.1 resolver wants a dot
  and a signed exponent, so it kept them strings, which strict number fields would refuse);
* no string holds a NUL or a lone UTF-16 surrogate (``"\\ud800"``), which no output could print.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional, Union

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import InputError, Problem
from ..fsutil import MIB, decode_text, read_regular_file
from .base import EXPONENT_FLOAT

MAX_PROFILE_BYTES = 1 * MIB
#: deeper than any profile or stack file needs (a profile is 4 levels deep)
MAX_DEPTH = 32
#: values after alias expansion (a large profile has a few hundred)
MAX_NODES = 20_000

_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_ALLOWED_TAGS = {"tag:yaml.org,2002:" + t for t in ("null", "bool", "int", "float", "str", "seq", "map", "merge")}


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader with a depth limit while composing, and only the plain YAML types."""

    def __init__(self, stream: str, max_depth: int = MAX_DEPTH):
        super().__init__(stream)
        self._depth = 0
        self._max_depth = max_depth

    def compose_node(self, parent: Optional[Node], index: Any) -> Node:  # type: ignore[override]
        self._depth += 1
        try:
            if self._depth > self._max_depth:
                mark = self.peek_event().start_mark
                raise ConstructorError(None, None, f"nested more than {self._max_depth} levels deep", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


# unquoted dates and times stay strings: drop the implicit timestamp resolver
BoundedLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _TIMESTAMP]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}


# YAML 1.2 core schema floats with an exponent (https://yaml.org/spec/1.2.2/#1023-core-schema)
BoundedLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(f"^{EXPONENT_FLOAT.pattern}$"),
                                    list("-+0123456789."))


def _unsupported(loader: yaml.SafeLoader, node: Node) -> Any:
    raise ConstructorError(None, None, f"the YAML tag {node.tag.replace('tag:yaml.org,2002:', '!!')} is not "
                           "supported (only mappings, lists, strings, numbers, booleans and null)", node.start_mark)


def _construct_mapping(loader: yaml.SafeLoader, node: MappingNode, deep: bool = False) -> dict:
    seen: set = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *base` is expanded by SafeLoader (flatten_mapping)
        if not isinstance(key_node, ScalarNode):
            kind = "list" if isinstance(key_node, SequenceNode) else "mapping"
            raise ConstructorError(None, None, f"a key must be a single value, not a {kind}", key_node.start_mark)
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            shown = repr(key) if isinstance(key, str) and key.isidentifier() and len(key) <= 64 else "a key"
            raise ConstructorError(None, None, f"duplicate key {shown}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


for _tag in ("binary", "timestamp", "set", "omap", "pairs"):
    BoundedLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _unsupported)
BoundedLoader.add_constructor(None, _unsupported)  # any other tag: !python/..., !custom
BoundedLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _bad_char(text: str) -> Optional[str]:
    for ch in text:
        if ch == "\x00":
            return "a NUL character"
        if "\ud800" <= ch <= "\udfff":
            return f"a lone surrogate (\\u{ord(ch):04x}), which is not a character"
    return None


def check_expansion(root: Node, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> None:
    """Refuse a node graph whose alias expansion exceeds the budget (counted without expanding it)."""
    memo: dict[int, tuple[int, int]] = {}
    active: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            active.discard(nid)
            children = _children(node)
            size = 1 + sum(memo[id(c)][0] for c in children)
            depth = 1 + max((memo[id(c)][1] for c in children), default=0)
            if size > max_nodes:
                raise ConstructorError(None, None, f"expands to more than {max_nodes:,} values (aliases "
                                       "repeated inside aliases?)", node.start_mark)
            if depth > max_depth:
                raise ConstructorError(None, None, f"nested more than {max_depth} levels deep once aliases "
                                       "are expanded", node.start_mark)
            memo[nid] = (size, depth)
            continue
        if nid in memo:
            continue
        if nid in active:
            raise ConstructorError(None, None, "an alias refers to the value that contains it", node.start_mark)
        if isinstance(node, ScalarNode):
            bad = _bad_char(node.value)
            if bad:
                raise ConstructorError(None, None, f"a string holds {bad}", node.start_mark)
            if node.tag not in _ALLOWED_TAGS:
                _unsupported(None, node)  # type: ignore[arg-type]
            memo[nid] = (1, 1)
            continue
        if node.tag not in _ALLOWED_TAGS:
            _unsupported(None, node)  # type: ignore[arg-type]
        active.add(nid)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node))


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def parse_yaml_text(text: str, name: str, what: str = "profile") -> Any:
    """The document in ``text`` (see the module docstring for what is refused)."""
    def fail(msg: str) -> InputError:
        return InputError(f"{name}: {msg}", problems=[Problem(path="", message=msg, file=name)])

    bad = _bad_char(text)
    if bad:
        raise fail(f"holds {bad}; save the {what} as plain UTF-8 text")
    loader = None
    try:
        loader = BoundedLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        check_expansion(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise fail(f"is not valid YAML{where}: {exc.problem or exc.context}") from None
    except yaml.reader.ReaderError as exc:
        raise fail(f"is not valid YAML: character #x{exc.character:04x} at position {exc.position} is not "
                   "allowed (a control character?)") from None
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        raise fail(f"is not valid YAML: {type(exc).__name__}") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml_document(path: Union[str, Path], what: str = "profile", limit: int = MAX_PROFILE_BYTES,
                       missing_hint: Optional[str] = "check the path; sample profiles live in stacks/profiles/",
                       ) -> dict[str, Any]:
    """Read one YAML mapping from a file; every failure is an InputError naming the file."""
    name = str(path)

    def fail(msg: str) -> InputError:
        return InputError(f"{name}: {msg}", problems=[Problem(path="", message=msg, file=name)])

    text = decode_text(read_regular_file(path, what=what, limit=limit, missing_hint=missing_hint), name, what)
    if not text.strip():
        raise fail(f"is empty; a {what} needs at least `name` and `model`" if what == "profile"
                   else f"is empty; not a {what}")
    doc = parse_yaml_text(text, name, what)
    if doc is None:
        raise fail(f"is empty; a {what} needs at least `name` and `model`" if what == "profile"
                   else f"is empty; not a {what}")
    if not isinstance(doc, dict):
        raise fail(f"must be a YAML mapping (key: value), not a {type(doc).__name__}")
    return doc
