"""The gap search's choice (experiments/w2s_gap.py `choose`, rewardsmith.w2s.claims.GAP_SEARCH applied) on
constructed screening results: only confirmed settings reaching the bar are eligible, the most accurate teacher
wins, ties go to the one listed first, and none leaves the protocol's setting."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.fixture
def w2s_gap(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """experiments/w2s_gap.py, imported as its own folder runs it (it imports experiments/teachers.py)."""
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    return importlib.import_module("w2s_gap")


def _teacher(acc: float, reaches: bool, gap: float = 9.0) -> dict[str, Any]:
    return {"teacher_val_acc": acc, "reaches_bar": reaches, "gap": gap, "gap_ci": [gap - 4.0, gap + 4.0]}


def _setting(seeds: list[int], **teachers: dict[str, Any]) -> dict[str, Any]:
    return {"seeds": seeds, "teachers": teachers}


def test_none_reaching_the_bar_keeps_the_protocols_setting(w2s_gap: ModuleType) -> None:
    settings = {"harmless/minilm-128": _setting([0, 1, 2], tfidf=_teacher(57.0, False, 1.0))}
    made = w2s_gap.choose(settings)
    assert made["chosen"] == "none reaches the bar: the protocol's setting stays"
    assert made["key"] == "w2s.setting" and made["evidence"]["gap_and_ci"] == {
        "harmless/minilm-128": {"tfidf": [1.0, [-3.0, 5.0]]}
    }


def test_a_setting_reaching_the_bar_on_seed_0_only_is_not_chosen(w2s_gap: ModuleType) -> None:
    settings = {"harmless/smollm2": _setting([0], probe=_teacher(60.0, True))}
    assert w2s_gap.choose(settings)["chosen"].startswith("none reaches the bar")


def test_the_most_accurate_teacher_among_confirmed_settings_wins(w2s_gap: ModuleType) -> None:
    settings = {
        "harmless/minilm-256": _setting([0, 1, 2], tfidf=_teacher(56.0, True), probe=_teacher(61.0, False)),
        "helpful/smollm2": _setting([0, 1, 2], tfidf=_teacher(58.5, True)),
        "helpful/minilm-256": _setting([0], probe=_teacher(70.0, True)),  # more accurate, but not confirmed
    }
    assert w2s_gap.choose(settings)["chosen"] == "helpful/smollm2 with teacher tfidf"


def test_ties_go_to_the_setting_and_teacher_listed_first(w2s_gap: ModuleType) -> None:
    settings = {
        "harmless/minilm-256": _setting([0, 1, 2], zeta=_teacher(58.0, True), alpha=_teacher(58.0, True)),
        "helpful/smollm2": _setting([0, 1, 2], beta=_teacher(58.0, True)),
    }
    assert w2s_gap.choose(settings)["chosen"] == "harmless/minilm-256 with teacher zeta"
    # The listing order decides, not the names: alpha listed first wins the same tie.
    settings["harmless/minilm-256"] = _setting([0, 1, 2], alpha=_teacher(58.0, True), zeta=_teacher(58.0, True))
    assert w2s_gap.choose(settings)["chosen"] == "harmless/minilm-256 with teacher alpha"
