"""The gold interface of `rewardsmith bon` and the RL gold tracker: one module per kind in rollouts/golds/, each
exporting `GOLD`, found by the project's one discovery function (rewardsmith.registry.discover). `--gold NAME` takes a
registered gold (`ifeval`, `math`); any other value is a reward model (`score` takes it), the learned gold of
rollouts/golds/reward_model.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from rewardsmith.data.schema import Turn
from rewardsmith.errors import DataError, UnknownNameError
from rewardsmith.registry import discover
from rewardsmith.rollouts.prompt import BonPrompt

GOLDS_PACKAGE = "rewardsmith.rollouts.golds"
LEARNED = "reward-model"  # the gold a model folder or hub id names

FloatArray = NDArray[np.float64]
# (model source, [(prompt turns, response)]) -> rewards (M,): the one inference path, handed down by jobs/bon.py.
ModelScorer = Callable[[str, Sequence[tuple[tuple[Turn, ...], str]]], FloatArray]


@dataclass(frozen=True)
class GoldContext:
    """What a gold may use besides the prompts and responses: score_with_model (jobs' inference path)."""

    score_with_model: ModelScorer


@dataclass(frozen=True)
class Gold:
    """name: how --gold names it (LEARNED: any reward model); needs: the prompt field every prompt must carry
    (meta key: "instructions", "answer"), or None; score(spec, prompts, responses, context) -> (P, N) gold values,
    NaN where a sample cannot be scored."""

    name: str
    title: str
    needs: str | None
    score: Callable[[str, Sequence[BonPrompt], Sequence[Sequence[str]], GoldContext], FloatArray]


def discover_golds() -> dict[str, Gold]:
    return discover(GOLDS_PACKAGE, "GOLD", Gold)


def resolve_gold(spec: str) -> Gold:
    """The gold `--gold spec` names: a registered one, else the learned gold (a reward model: a path, or a hub id's
    owner/name; loading says when it is not there). UnknownNameError, listing the golds, for a bare name that is
    neither (a misspelt `ifevl`)."""
    golds = discover_golds()
    if spec in golds and spec != LEARNED:
        return golds[spec]
    if Path(spec).expanduser().exists() or "/" in spec or spec.startswith((".", "~")):
        return golds[LEARNED]
    known = [name for name in golds if name != LEARNED]
    raise UnknownNameError("gold", spec, [*known, "or a reward model (a folder that exists, or a hub id)"])


def check_prompts_for(gold: Gold, spec: str, prompts: Sequence[BonPrompt], source: str) -> None:
    """DataError (one line) when a prompt lacks what the gold needs (an `ifeval` gold on prompts without
    instructions)."""
    if gold.needs is None:
        return
    lacking = [p.id for p in prompts if not p.meta.get(gold.needs)]
    if lacking:
        hint = {"instructions": "use --prompts ifeval/<dataset>", "answer": "use --prompts math-500"}.get(
            gold.needs, ""
        )
        raise DataError(
            f"--gold {spec}: {len(lacking)} of {len(prompts)} prompts of {source} carry no {gold.needs} "
            f"(first: {lacking[0]}); {hint}".rstrip("; ")
        )
