"""The W2S objectives, one module each (naive.py, confidence.py, anchor.py). A module's `OBJECTIVE` is a
W2SObjective: its name (what `methods[].objective` names in a shift config) and how to build the training objective
for one student. A new objective is one new module; w2s_objectives() finds every module of this package, so
nothing registers itself on import.

An objective is called every step as objective(model, batch, StepInfo) -> LossResult with "total" among its terms
(rewardsmith.train.objectives).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rewardsmith.errors import UnknownNameError
from rewardsmith.registry import discover
from rewardsmith.train.objectives import Objective


@dataclass
class StudentContext:
    """What an objective may need to build for one student: the shift run (its reference-state cache), the fresh
    student model, its tokenizer and its encoded training pairs."""

    run: Any
    model: Any
    tokenizer: Any
    encoded: list[Any]


@dataclass(frozen=True)
class W2SObjective:
    """name: the objective's name in configs; build(method config, context) -> the step objective."""

    name: str
    build: Callable[[Any, StudentContext], Objective]


def w2s_objectives() -> dict[str, W2SObjective]:
    """Every W2S objective of this package by name."""
    return discover(__name__, "OBJECTIVE", W2SObjective)


def w2s_objective(name: str) -> W2SObjective:
    """The W2S objective `name`; UnknownNameError listing the known ones."""
    found = w2s_objectives()
    if name not in found:
        raise UnknownNameError("W2S objective", name, list(found))
    return found[name]
