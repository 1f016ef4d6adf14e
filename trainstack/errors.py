"""Errors a user can cause, each with the exit code of docs/DESIGN.md.

Every command catches :class:`TrainstackError` at the edge and prints it; anything else
is a bug and may show a traceback. Exit codes: 2 bad input, 3 infeasible, 4 policy,
5 cloud API or credentials.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .secrets import scrub, value_kind

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_INFEASIBLE = 3
EXIT_POLICY = 4
EXIT_CLOUD_API = 5


def did_you_mean(given: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Close matches for a misspelt name (case-insensitive), best first."""
    pool = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(str(given).lower(), list(pool), n=n, cutoff=0.6)
    return [pool[h] for h in hits]


def short_repr(value: Any, limit: int = 60) -> str:
    """A value as the user wrote it, cut short so one problem stays on one line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def value_at(doc: Any, loc: tuple) -> tuple[bool, Any]:
    """(found, value) at a validation error's location in the document the user wrote (keys and
    list indexes), so a problem can show the value given."""
    cur = doc
    for part in loc:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and part < len(cur):
            cur = cur[part]
        else:
            return False, None
    return True, cur


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one input: where, what was given, what is allowed."""

    path: str
    message: str
    given: Any = None
    allowed: str | None = None
    suggestions: Sequence[str] = ()
    file: str | None = None
    has_given: bool = False
    #: why the value given is not repeated (it may be a secret); set instead of ``given``
    hidden: str | None = None

    def _hidden_reason(self) -> str | None:
        if self.hidden:
            return self.hidden
        if self.has_given and isinstance(self.given, str):
            kind = value_kind(self.given)
            if kind:
                return f"it looks like {kind}"
        return None

    def render(self) -> str:
        where = f"{self.file}: " if self.file else ""
        where += f"{self.path}: " if self.path else ""
        parts = [self.message]
        hidden = self._hidden_reason()
        if hidden:
            parts.append(f"the value given is not shown ({hidden})")
        elif self.has_given:
            parts.append(f"given {short_repr(self.given)}")
        if self.allowed:
            parts.append(f"allowed: {self.allowed}")
        if self.suggestions:
            parts.append("did you mean " + " or ".join(repr(s) for s in self.suggestions) + "?")
        return where + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "path": self.path, "message": self.message}
        hidden = self._hidden_reason()
        if hidden:
            out["given_hidden"] = hidden
        elif self.has_given:
            plain = isinstance(self.given, (str, int, bool, type(None))) or (
                isinstance(self.given, float) and math.isfinite(self.given))
            out["given"] = self.given if plain else repr(self.given)  # NaN/inf as text: JSON stays standard
        if self.allowed:
            out["allowed"] = self.allowed
        if self.suggestions:
            out["did_you_mean"] = list(self.suggestions)
        return out


def scrub_problem(p: Problem, secrets: Sequence[str]) -> Problem:
    """``p`` without any of ``secrets`` in its path, message or value given."""
    given_text = p.given if isinstance(p.given, str) else repr(p.given)
    leaks = p.has_given and any(s in given_text for s in secrets)
    return Problem(path=scrub(p.path, secrets), message=scrub(p.message, secrets),
                   given=None if leaks else p.given, has_given=p.has_given and not leaks,
                   allowed=p.allowed, suggestions=tuple(p.suggestions), file=p.file,
                   hidden="it is a credential found in this input" if leaks else p.hidden)


class TrainstackError(Exception):
    """Base of every user-facing error; carries its exit code."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, *, problems: Sequence[Problem] = (), hint: str | None = None,
                 secrets: Sequence[str] = ()):
        if secrets:  # texts found to be credentials: never part of what is printed

            message = scrub(message, secrets)
            hint = scrub(hint, secrets) if hint else hint
            problems = [scrub_problem(p, secrets) for p in problems]
        super().__init__(message)
        self.message = message
        self.problems = list(problems)
        self.hint = hint

    def lines(self) -> list[str]:
        lines = [p.render() for p in self.problems] if self.problems else [self.message]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return lines

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.message, "exit_code": self.exit_code}
        if self.problems:
            out["problems"] = [p.to_dict() for p in self.problems]
        if self.hint:
            out["hint"] = self.hint
        return out


class InputError(TrainstackError):
    """A profile, file, flag or name the user gave is wrong (exit 2)."""

    exit_code = EXIT_BAD_INPUT


class InfeasibleError(TrainstackError):
    """Nothing satisfies the constraints (exit 3); carries suggestions."""

    exit_code = EXIT_INFEASIBLE

    def __init__(self, message: str, *, suggestions: Sequence[str] = (), details: dict | None = None, **kw: Any):
        super().__init__(message, **kw)
        self.suggestions = list(suggestions)
        self.details = details or {}

    def lines(self) -> list[str]:
        lines = super().lines()
        rejected = self.details.get("rejected") or []
        if rejected:
            lines.append("rejected families:")
            lines += [f"  {r['family']:<10} {r['reason']}" for r in rejected]
        if self.suggestions:
            lines.append("what would make it feasible:")
            lines += [f"  - {s}" for s in self.suggestions]
        return lines

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["suggestions"] = self.suggestions
        out.update(self.details)
        return out


class PolicyError(TrainstackError):
    """A mandatory policy failed (exit 4)."""

    exit_code = EXIT_POLICY


class CloudApiError(TrainstackError):
    """An Alibaba Cloud API or credentials failure (exit 5)."""

    exit_code = EXIT_CLOUD_API


@dataclass
class ProblemList:
    """Collects problems so a command can report all of them at once."""

    file: str | None = None
    items: list[Problem] = field(default_factory=list)

    def add(self, path: str, message: str, **kw: Any) -> None:
        self.items.append(Problem(path=path, message=message, file=self.file, **kw))

    def raise_if_any(self, message: str = "invalid input") -> None:
        if self.items:
            raise InputError(message, problems=self.items)
