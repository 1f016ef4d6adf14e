"""The policies' decisions as pure functions over a :class:`~trainstack.rules.stack_view.StackView`.

One module per resource family (``gpu``, ``cost``, ``storage``, ``network``, ``ram``, ``tags``,
``instance``). A resource check takes the items one resource declares; a stack check the whole view.
Each yields :class:`Finding` s and may raise ``ValueUnknown`` (the policy cannot run: advisory) or
``NotApplicable``. ``CHECKS`` maps each policy name to its check and the view part it judges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional


@dataclass(frozen=True)
class Finding:
    """One violation: its message and the resource it names (stack checks: None for the stack)."""

    message: str
    resource: Optional[str] = None
    urn: Optional[str] = None


Check = Callable[..., Iterator[Finding]]
