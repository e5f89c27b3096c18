"""Tiny benchmark releases written in each published schema (the hub layouts under a data directory), the
hand-chosen rewards the bench tests score them with, and checks that the files read back as written.

Rewards are looked up by response text, so each test knows every reward and computes every metric by hand."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rewardsmith.bench.schema import Text


def write_parquet(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([dict(r) for r in rows]), path)
    return path


class TableScore:
    """A score function reading each response's reward from a table (response text -> reward); counts its calls
    and the texts it was given."""

    def __init__(self, rewards: Mapping[str, float]):
        self.rewards = dict(rewards)
        self.calls: list[int] = []

    def __call__(self, texts: Sequence[Text]) -> np.ndarray:
        self.calls.append(len(texts))
        return np.array([self.rewards[response] for _, response in texts], dtype=np.float64)


# ------------------------------------------------------------------------------------------------ RewardBench

# (subset, id, chosen, rejected): rewards below. Lengths: "cL..." strings are long, "s" strings short.
RB1_ROWS = [
    ("alpacaeval-easy", 1, "a1 chosen, long and right", "a1 no"),  # 2 > 1: right
    ("alpacaeval-easy", 2, "a2 tie c", "a2 tie r"),  # 1 = 1: a tie is wrong
    ("mt-bench-easy", 3, "m1 chosen", "m1 rejected"),  # right
    ("xstest-should-respond", 4, "x1 chosen", "x1 rejected"),  # 0 < 1: wrong
    ("xstest-should-respond", 5, "x2 chosen", "x2 rejected"),  # right
    ("hep-python", 6, "h1 chosen", "h1 rejected"),  # right
    ("math-prm", 7, "p1 chosen", "p1 rejected"),  # wrong
]
RB1_REWARDS = {
    "a1 chosen, long and right": 2.0,
    "a1 no": 1.0,
    "a2 tie c": 1.0,
    "a2 tie r": 1.0,
    "m1 chosen": 1.0,
    "m1 rejected": 0.0,
    "x1 chosen": 0.0,
    "x1 rejected": 1.0,
    "x2 chosen": 3.0,
    "x2 rejected": -1.0,
    "h1 chosen": 1.0,
    "h1 rejected": 0.5,
    "p1 chosen": 0.0,
    "p1 rejected": 0.1,
}


def rb1_row(subset: str, row_id: int, chosen: str, rejected: str, prompt: str = "") -> dict[str, Any]:
    """A RewardBench row (prompt "prompt <id>" unless given)."""
    return {
        "prompt": prompt or f"prompt {row_id}",
        "chosen": chosen,
        "chosen_model": "m-a",
        "rejected": rejected,
        "rejected_model": "m-b",
        "subset": subset,
        "id": row_id,
    }


def write_reward_bench(
    data_dir: Path, rows: Sequence[tuple[str, int, str, str]] = tuple(RB1_ROWS), more: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """Writes the RewardBench release of `rows` (rb1_row's arguments), then the records `more`; returns its records."""
    records = [rb1_row(*row) for row in rows] + list(more)
    write_parquet(data_dir / "reward-bench" / "data" / "filtered-00000-of-00001.parquet", records)
    return records


# ---------------------------------------------------------------------------------------------- RewardBench 2


def rb2_row(row_id: str, subset: str, chosen: list[str], rejected: list[str], prompt: str = "") -> dict[str, Any]:
    return {
        "id": row_id,
        "prompt": prompt or f"question {row_id}",
        "chosen": chosen,
        "rejected": rejected,
        "num_correct": len(chosen),
        "num_incorrect": len(rejected),
        "total_completions": len(chosen) + len(rejected),
        "models": ["m"] * (len(chosen) + len(rejected)),
        "subset": subset,
        "additional_metadata": {"category": "x"},
    }


RB2_ROWS = [
    rb2_row("f1", "Factuality", ["f1c"], ["f1a", "f1b", "f1d"]),  # [3, 1, 2, 0]: 1
    rb2_row("f2", "Factuality", ["f2c"], ["f2a", "f2b", "f2d"]),  # [2, 2, 1, 2]: three at the top: 1/3
    rb2_row("f3", "Factuality", ["f3c"], ["f3a", "f3b", "f3d"]),  # [1, 2, 0, 0]: 0
    rb2_row("o1", "Focus", ["o1c"], ["o1a", "o1b", "o1d"]),  # [1, 0, 0, 0]: 1
    rb2_row("ref:1", "Ties", ["A"], ["B", "C"]),  # A 5 | B 3, C 4: gap 1
    rb2_row("tied:1", "Ties", ["D", "E", "F"], ["G", "H"]),  # D 10, E 8, F 9 | G 7, H 2: gap 1, spread 2
    rb2_row("ref:2", "Ties", ["I"], ["J"]),  # I 1 | J 2: gap -1
    rb2_row("tied:2", "Ties", ["K", "L"], ["M"]),  # K 6, L 5.5 | M 1: gap 4.5, spread 0.5
]
RB2_REWARDS = {
    "f1c": 3,
    "f1a": 1,
    "f1b": 2,
    "f1d": 0,
    "f2c": 2,
    "f2a": 2,
    "f2b": 1,
    "f2d": 2,
    "f3c": 1,
    "f3a": 2,
    "f3b": 0,
    "f3d": 0,
    "o1c": 1,
    "o1a": 0,
    "o1b": 0,
    "o1d": 0,
    "A": 5,
    "B": 3,
    "C": 4,
    "D": 10,
    "E": 8,
    "F": 9,
    "G": 7,
    "H": 2,
    "I": 1,
    "J": 2,
    "K": 6,
    "L": 5.5,
    "M": 1,
}
# By hand: ref accuracy (1 + 0) / 2; tied accuracy (1 + 1) / 2; preferred: prompt 1 gap 1 > spread 2? no,
# prompt 2 4.5 > 0.5 yes -> 1/2; hard: min(1, 1) > 2 no, min(-1, 4.5) > 0.5 no -> 0; margins tanh(1/2 - 1) and
# tanh(-1/0.5 - 1).
RB2_TIES_SCORE = 0.3 * 1.0 + 0.3 * 0.5 + 0.2 * 0.5 + 0.2 * 0.0 + 0.01 * (np.tanh(-0.5) + np.tanh(-3.0)) / 2
RB2_FACTUALITY = (1 + 1 / 3 + 0) / 3


def write_reward_bench_2(data_dir: Path, rows: Sequence[Mapping[str, Any]] = tuple(RB2_ROWS)) -> Path:
    return write_parquet(data_dir / "reward-bench-2" / "data" / "test-00000-of-00001.parquet", rows)


# ------------------------------------------------------------------------------------------------------- PPE


def _criteria(value: bool) -> dict[str, bool]:
    return {
        k: value
        for k in (
            "complexity",
            "creativity",
            "domain_knowledge",
            "problem_solving",
            "real_world",
            "specificity",
            "technical_accuracy",
        )
    }


def _battle(
    qid: str, winner: str, r1: str, r2: str, *, hard: bool = False, code: bool = False, instruction: bool = False
) -> dict[str, Any]:
    return {
        "question_id": qid,
        "model_a": "a",
        "model_b": "b",
        "winner": winner,
        "prompt": f"ask {qid}",
        "response_1": r1,
        "response_2": r2,
        "language": "English",
        "conv_metadata": {"turns": 1},
        "is_code": code,
        "is_refusal": False,
        "category_tag": {
            "criteria_v0.1": _criteria(hard),
            "if_v0.1": {"if": instruction, "score": 3},
            "math_v0.1": {"math": False},
        },
    }


PPE_HUMAN_ROWS = [
    _battle("q1", "model_a", "q1 one", "q1 two", hard=True),  # 2 > 1, model_a won: right
    _battle("q2", "model_b", "q2 one", "q2 two", code=True),  # 2 > 1 but model_b won: wrong
    _battle("q3", "tie", "q3 one", "q3 two"),  # left out
    _battle("q4", "tie (bothbad)", "q4 one", "q4 two"),  # left out
    _battle("q5", "model_a", "q5 one", "q5 two", instruction=True),  # 1 = 1: 1/2
]
PPE_HUMAN_REWARDS = {
    "q1 one": 2,
    "q1 two": 1,
    "q2 one": 2,
    "q2 two": 1,
    "q3 one": 0,
    "q3 two": 0,
    "q4 one": 0,
    "q4 two": 0,
    "q5 one": 1,
    "q5 two": 1,
}


def write_ppe_human(data_dir: Path, rows: Sequence[Mapping[str, Any]] = tuple(PPE_HUMAN_ROWS)) -> Path:
    return write_parquet(data_dir / "ppe" / "PPE-Human-Preference-V1" / "data" / "test-00000-of-00001.parquet", rows)


def _bok_row(
    qid: str, responses: Sequence[str], correct: Sequence[bool], pairs: Sequence[tuple[int, int]]
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "question_id": qid,
        "model_name": "gen",
        "prompt": f"solve {qid}",
        "scores": list(correct),
        "mean_score": float(np.mean(correct)),
        "sampled_conflict_pairs": [list(p) for p in pairs],
    }
    row.update({f"response_{k + 1}": text for k, text in enumerate(responses)})
    return row


# Row A: rewards [4, 3, 2, 1], correct [0, 1, 0, 1]; row B: rewards [1, 1, 0, 2], correct [1, 0, 0, 1].
PPE_BOK_ROWS = [
    _bok_row("A", ["A1", "A2", "A3", "A4"], [False, True, False, True], [(0, 1), (2, 3), (0, 2)]),
    _bok_row("B", ["B1", "B2", "B3", "B4"], [True, False, False, True], [(0, 1), (2, 3)]),
]
PPE_BOK_REWARDS = {"A1": 4, "A2": 3, "A3": 2, "A4": 1, "B1": 1, "B2": 1, "B3": 0, "B4": 2}
# Best-of-K by enumeration of the K-subsets: row A [1/2, 1/3, 1/4, 0], row B [1/2, 3/4, 7/8, 1].
PPE_CURVE_A = [0.5, 1 / 3, 0.25, 0.0]
PPE_CURVE_B = [0.5, 0.75, 0.875, 1.0]


def write_ppe_correctness(
    data_dir: Path, rows: Sequence[Mapping[str, Any]] = tuple(PPE_BOK_ROWS), folder: str = "PPE-MATH-Best-of-K"
) -> Path:
    return write_parquet(data_dir / "ppe" / folder / "data" / "train-00000-of-00001.parquet", rows)


# -------------------------------------------------------------------------------------------------- RM-Bench


def write_rm_bench_chat(data_dir: Path, prompts: int = 2) -> Path:
    """chat_filtered.json with `prompts` rows; the response texts encode (prompt, side, style)."""
    rows = [
        {
            "id": f"chat/{p}",
            "subset": "chat",
            "prompt": f"chat prompt {p}",
            "chosen": [f"c{p}{s}" + "." * s for s in range(3)],
            "rejected": [f"r{p}{s}" + "." * s for s in range(3)],
        }
        for p in range(prompts)
    ]
    path = data_dir / "rm-bench" / "chat_filtered.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ a larger synthetic sample


class SyntheticModels:
    """Two reward models over generated releases, MODELS: name -> (skill, length_bias), with
    reward = skill * correct + length_bias * length / 100 + noise and the same noise draw for both (so their paired
    difference is the skill and bias gap). Every text is unique."""

    MODELS: ClassVar[dict[str, tuple[float, float]]] = {"rm-small": (0.8, 0.8), "rm-large": (2.0, 0.1)}

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.rewards: dict[str, dict[str, float]] = {name: {} for name in self.MODELS}
        self._count = 0

    def text(self, tag: str, correct: bool, words: int | None = None) -> str:
        self._count += 1
        n = int(words if words is not None else self.rng.integers(3, 40))
        text = f"{tag} #{self._count} " + " ".join(["word"] * n)
        noise = float(self.rng.normal())
        for name, (skill, bias) in self.MODELS.items():
            self.rewards[name][text] = skill * float(correct) + bias * len(text) / 100 + noise
        return text


def synthetic_releases(data_dir: Path, seed: int = 0) -> SyntheticModels:
    """Every suite's release (RewardBench, RewardBench 2, PPE human preference, three PPE correctness sets,
    RM-Bench chat and code) with a few dozen rows each; returns the two models' reward tables."""
    from rewardsmith.bench.suites.reward_bench import EXAMPLE_COUNTS

    gen = SyntheticModels(seed)
    rng = gen.rng
    rb1 = [
        (subset, 1000 * k + i, gen.text(f"{subset} chosen", True), gen.text(f"{subset} rejected", False))
        for k, subset in enumerate(EXAMPLE_COUNTS)
        for i in range(12)
    ]
    write_reward_bench(data_dir, rb1)
    rb2 = [
        rb2_row(
            f"{subset}-{i}", subset, [gen.text("rb2 chosen", True)], [gen.text("rb2 rejected", False) for _ in range(3)]
        )
        for subset in ("Factuality", "Precise IF", "Math", "Safety", "Focus")
        for i in range(15)
    ]
    for p in range(8):
        rb2.append(
            rb2_row(
                f"ref:{p}", "Ties", [gen.text("ties ref", True)], [gen.text("ties ref no", False) for _ in range(3)]
            )
        )
        rb2.append(
            rb2_row(
                f"tied:{p}",
                "Ties",
                [gen.text("ties ok", True) for _ in range(3)],
                [gen.text("ties no", False) for _ in range(3)],
            )
        )
    write_reward_bench_2(data_dir, rb2)
    battles = []
    for q in range(120):
        winner = str(rng.choice(["model_a", "model_b", "tie"], p=[0.45, 0.45, 0.1]))
        r1, r2 = gen.text("arena", winner == "model_a"), gen.text("arena", winner == "model_b")
        battles.append(
            _battle(
                f"arena{q}",
                winner,
                r1,
                r2,
                hard=bool(rng.random() < 0.3),
                code=bool(rng.random() < 0.2),
                instruction=bool(rng.random() < 0.3),
            )
        )
    write_ppe_human(data_dir, battles)
    for folder in ("PPE-MMLU-Pro-Best-of-K", "PPE-MATH-Best-of-K", "PPE-GPQA-Best-of-K"):
        rows = []
        for q in range(25):
            correct = [bool(v) for v in rng.random(8) < 0.4]
            responses = [gen.text(f"{folder} answer", c) for c in correct]
            good, bad = [i for i, c in enumerate(correct) if c], [i for i, c in enumerate(correct) if not c]
            pairs = [(int(rng.choice(good)), int(rng.choice(bad))) for _ in range(4)] if good and bad else []
            rows.append(_bok_row(f"{folder}-{q}", responses, correct, pairs))
        write_ppe_correctness(data_dir, rows, folder)
    for domain in ("chat", "code"):
        rows_rm = [
            {
                "id": f"{domain}/{p}",
                "subset": domain,
                "prompt": f"{domain} prompt {p}",
                "chosen": [gen.text(f"{domain} chosen s{s}", True, words=5 + 25 * s) for s in range(3)],
                "rejected": [gen.text(f"{domain} rejected s{s}", False, words=5 + 25 * s) for s in range(3)],
            }
            for p in range(20)
        ]
        path = data_dir / "rm-bench" / f"{domain}_filtered.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rows_rm), encoding="utf-8")
    return gen


def all_rewards() -> dict[str, float]:
    return {
        k: float(v)
        for table in (RB1_REWARDS, RB2_REWARDS, PPE_HUMAN_REWARDS, PPE_BOK_REWARDS)
        for k, v in table.items()
    }


def test_fixture_files_read_back_as_written(tmp_path: Path) -> None:
    path = write_reward_bench_2(tmp_path)
    table = pq.read_table(path).to_pylist()
    assert [r["id"] for r in table] == [r["id"] for r in RB2_ROWS]
    assert table[5]["chosen"] == ["D", "E", "F"] and table[5]["num_correct"] == 3
    bok = pq.read_table(write_ppe_correctness(tmp_path)).to_pylist()
    assert bok[0]["sampled_conflict_pairs"] == [[0, 1], [2, 3], [0, 2]]
    assert bok[1]["scores"] == [True, False, False, True]
