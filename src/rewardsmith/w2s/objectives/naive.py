"""naive: soft Bradley-Terry on the teacher's probabilities (the batch's labels), METHODS.md 1 L_w2s; also the
ceiling's objective, fed gold labels. It is the Trainer's own soft-label BT objective."""

from __future__ import annotations

from typing import Any

from rewardsmith.train.objectives import BradleyTerryObjective
from rewardsmith.w2s.objectives import StudentContext, W2SObjective


def build(method: Any, context: StudentContext) -> BradleyTerryObjective:
    return BradleyTerryObjective()


OBJECTIVE = W2SObjective("naive", build)
