"""The one quoting path from profile text to a shell: every word a launcher renders is a
:data:`Word`, and only :func:`shell_word` turns it into shell text.

A word is a tuple of parts: literal text (written single-quoted, so ``$()``, backticks,
newlines and quotes stay literal) or a :class:`Ref` to a variable the platform sets at run
time (written ``"${NAME}"``, the only expansion trainstack ever emits; PAI-DLC's ``$RANK`` is
one). Text a shell cannot carry (NUL, unpaired surrogates) is refused, not mangled.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Iterable, Union

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


_DEFAULT = re.compile(r"[A-Za-z0-9._-]*")


@dataclass(frozen=True)
class Ref:
    """A variable set at run time (a PAI-DLC pod's ``RANK``), never profile text; ``default``
    (trainstack's own plain word) stands in where the platform leaves it unset."""

    name: str
    default: str | None = None

    def __post_init__(self) -> None:
        if not ENV_NAME.fullmatch(self.name):
            raise ValueError(f"not a variable name: {self.name!r}")
        if self.default is not None and not _DEFAULT.fullmatch(self.default):
            raise ValueError(f"not a plain default: {self.default!r}")

    @property
    def expansion(self) -> str:
        return f"${{{self.name}}}" if self.default is None else f"${{{self.name}:-{self.default}}}"


Part = Union[str, Ref]
Word = tuple[Part, ...]


def lit(value: object) -> Word:
    return (str(value),)


def joined(*parts: Part) -> Word:
    return tuple(p for p in parts if p != "")


def is_literal(word: Word) -> bool:
    return all(isinstance(p, str) for p in word)


def text_of(word: Word) -> str:
    """The literal text of a word without run-time parts (for comparisons and docs)."""
    return "".join(p if isinstance(p, str) else p.expansion for p in word)


def unsafe_text(text: str) -> str | None:
    """Why ``text`` cannot travel through a shell variable or argument, or None."""
    if "\x00" in text:
        return "contains a NUL character, which no shell argument or variable can hold"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (an unpaired surrogate)"
    return None


def shell_word(word: Word) -> str:
    """One shell word: literal parts single-quoted, references double-quoted."""
    out = []
    for part in word:
        if isinstance(part, Ref):
            out.append(f'"{part.expansion}"')
            continue
        why = unsafe_text(part)
        if why:
            raise ValueError(f"a value {why}")
        out.append(shlex.quote(part))
    return "".join(out) or "''"


def shell_line(words: Iterable[Word]) -> str:
    return " ".join(shell_word(w) for w in words)


def assignment(name: str, word: Word, export: bool = False) -> str:
    if not ENV_NAME.fullmatch(name):
        raise ValueError(f"not a shell variable name: {name!r}")
    return f"{'export ' if export else ''}{name}={shell_word(word)}\n"


def bash_array(name: str, words: Iterable[Word]) -> str:
    if not ENV_NAME.fullmatch(name):
        raise ValueError(f"not a shell variable name: {name!r}")
    return f"{name}=({shell_line(words)})\n"
