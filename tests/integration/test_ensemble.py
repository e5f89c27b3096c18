"""Ensembles of reward models (models.ensemble, jobs.ensemble): a folder every scoring command takes, whose rewards
are the rule over the members' own `score` outputs, independent of any member's scale; bad input in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from helpers import one_line_error, rk, tiny_reward_model
from rewardsmith.jobs.ensemble import make_ensemble
from rewardsmith.jobs.score import score_file
from rewardsmith.models.ensemble import EnsembleSpec, Reference, combine, scales

PAIRS = [
    {
        "prompt": f"How do I keep basil alive on a windowsill, question {i}?",
        "chosen": f"Water it when the top soil is dry and give it six hours of sun ({i}).",
        "rejected": "Plants are hard." if i % 2 else "Just buy another one every week.",
    }
    for i in range(12)
]


@pytest.fixture(scope="module")
def rewardsmith_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_reward_model(tmp_path_factory.mktemp("rs") / "model", seed=11)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("files")
    reference, scored = root / "reference.jsonl", root / "pairs.jsonl"
    reference.write_text("".join(json.dumps(r) + "\n" for r in PAIRS[:8]))
    scored.write_text("".join(json.dumps(r) + "\n" for r in PAIRS[4:]))
    return reference, scored


def _scores(model: Path, pairs: Path, out: Path) -> np.ndarray:
    """(N, 2) chosen and rejected rewards `score` writes for the pairs file."""
    score_file(str(model), pairs, out, progress=False)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    return np.array([[r["reward_chosen"], r["reward_rejected"]] for r in rows])


def test_an_ensemble_of_three_kinds_of_model_scores_as_its_rule_over_the_members_own_scores(
    tmp_path: Path, rewardsmith_model: Path, trl_chat_model: Path, lora_adapter: Path, files
) -> None:
    reference, pairs = files
    members = [rewardsmith_model, trl_chat_model, lora_adapter]
    # The members' own score outputs, on the reference texts and on the scored pairs.
    ref = np.stack([_scores(m, reference, tmp_path / f"ref{k}.jsonl").ravel() for k, m in enumerate(members)])
    own = np.stack([_scores(m, pairs, tmp_path / f"own{k}.jsonl") for k, m in enumerate(members)])
    z = (own - ref.mean(axis=1)[:, None, None]) / ref.std(axis=1, ddof=1)[:, None, None]
    for rule, lam in (("mean", 1.0), ("min", 1.0), ("uwo", 0.5)):
        ensemble = tmp_path / f"ensemble-{rule}"
        spec = make_ensemble([str(m) for m in members], ensemble, rule, lam, reference, progress=False).metrics
        assert spec["rule"] == rule and spec["reference"]["texts"] == 16
        assert np.allclose(spec["reference"]["mean"], ref.mean(axis=1), atol=1e-9)
        assert np.allclose(spec["reference"]["sd"], ref.std(axis=1, ddof=1), atol=1e-9)
        expected = {"mean": z.mean(0), "min": z.min(0), "uwo": z.mean(0) - lam * z.std(0, ddof=1)}[rule]
        rows = [json.loads(x) for x in _ensemble_rows(ensemble, pairs, tmp_path / f"{rule}.jsonl")]
        got = np.array([[r["reward_chosen"], r["reward_rejected"]] for r in rows])
        sd = np.array([[r["reward_sd_chosen"], r["reward_sd_rejected"]] for r in rows])
        assert np.abs(got - expected).max() < 1e-6 and np.abs(sd - z.std(0, ddof=1)).max() < 1e-6
        margins = got[:, 0] - got[:, 1]
        assert np.allclose([r["p_chosen"] for r in rows], 1 / (1 + np.exp(-margins)), atol=1e-9)


def _ensemble_rows(ensemble: Path, pairs: Path, out: Path) -> list[str]:
    score_file(str(ensemble), pairs, out, progress=False)
    return out.read_text().splitlines()


def test_a_member_on_another_scale_changes_nothing(
    tmp_path: Path, rewardsmith_model: Path, trl_chat_model: Path, files
) -> None:
    from safetensors.torch import load_file, save_file

    reference, pairs = files
    scaled = tmp_path / "scaled"
    shutil.copytree(rewardsmith_model, scaled)
    heads = load_file(str(scaled / "heads.safetensors"))
    save_file({k: v * 100 for k, v in heads.items()}, str(scaled / "heads.safetensors"))
    plain = _scores(rewardsmith_model, pairs, tmp_path / "a.jsonl")
    assert np.allclose(_scores(scaled, pairs, tmp_path / "b.jsonl"), 100 * plain, rtol=1e-4)
    out = {}
    for name, member in (("plain", rewardsmith_model), ("scaled", scaled)):
        folder = tmp_path / f"ensemble-{name}"
        make_ensemble([str(member), str(trl_chat_model)], folder, "uwo", 1.0, reference, progress=False)
        rows = [json.loads(x) for x in _ensemble_rows(folder, pairs, tmp_path / f"{name}.jsonl")]
        out[name] = np.array([[r["reward_chosen"], r["reward_rejected"], r["reward_sd_chosen"]] for r in rows])
    assert np.abs(out["plain"] - out["scaled"]).max() < 1e-5
    # The same holds for a shift as well as a scale, for every rule (the standardisation is affine-invariant).
    rng = np.random.default_rng(0)
    ref, items = rng.normal(size=(3, 40)), rng.normal(size=(3, 9))
    moved_ref, moved_items = ref.copy(), items.copy()
    moved_ref[1], moved_items[1] = 100 * ref[1] + 7, 100 * items[1] + 7
    for rule in ("mean", "min", "uwo"):
        a = combine(items, EnsembleSpec(("a", "b", "c"), rule, 0.7, Reference("r", 40, "d", *scales(ref))))
        b = combine(moved_items, EnsembleSpec(("a", "b", "c"), rule, 0.7, Reference("r", 40, "d", *scales(moved_ref))))
        assert np.abs(a[0] - b[0]).max() < 1e-9 and np.abs(a[1] - b[1]).max() < 1e-9


def test_bad_ensembles_end_in_one_line(tmp_path: Path, rewardsmith_model: Path, trl_chat_model: Path, files) -> None:
    reference, pairs = files
    one_line_error(
        rk("ensemble", "-m", rewardsmith_model, "-o", tmp_path / "one", "--reference", reference), "at least two"
    )
    one_line_error(
        rk(
            "ensemble", "-m", rewardsmith_model, "-m", tmp_path / "gone", "-o", tmp_path / "e", "--reference", reference
        ),
        "gone",
        "does not exist",
    )
    one_line_error(
        rk("ensemble", "-m", rewardsmith_model, "-m", trl_chat_model, "-o", tmp_path / "e", "--rule", "median"),
        "median",
    )
    good = tmp_path / "good"
    make_ensemble([str(rewardsmith_model), str(trl_chat_model)], good, reference=reference, progress=False)
    # An ensemble inside an ensemble, and one whose file lists itself.
    one_line_error(rk("ensemble", "-m", good, "-m", trl_chat_model, "-o", tmp_path / "nested"), "itself an ensemble")
    spec = json.loads((good / "ensemble.json").read_text())
    spec["members"][1]["source"] = "."
    (good / "ensemble.json").write_text(json.dumps(spec))
    one_line_error(rk("score", "-m", good, "-i", pairs, "-o", tmp_path / "s.jsonl"), "the ensemble itself")
    # A member moved away after the ensemble was made.
    moved = tmp_path / "moved"
    make_ensemble([str(rewardsmith_model), str(trl_chat_model)], moved, reference=reference, progress=False)
    spec = json.loads((moved / "ensemble.json").read_text())
    spec["members"][0]["source"] = str(tmp_path / "elsewhere")
    (moved / "ensemble.json").write_text(json.dumps(spec))
    one_line_error(rk("score", "-m", moved, "-i", pairs, "-o", tmp_path / "s.jsonl"), "elsewhere", "does not exist")
    # Commands that need one model say so.
    fine = tmp_path / "fine"
    make_ensemble([str(rewardsmith_model), str(trl_chat_model)], fine, reference=reference, progress=False)
    one_line_error(rk("export", "-m", fine, "-o", tmp_path / "x"), "ensemble", "one model")
    assert not (tmp_path / "x").exists()


def test_eval_and_calibrate_take_an_ensemble_as_a_model(
    tmp_path: Path, rewardsmith_model: Path, trl_chat_model: Path, lora_adapter: Path, files
) -> None:
    from typer.testing import CliRunner

    from rewardsmith.cli import app

    reference, pairs = files
    ensemble = tmp_path / "ensemble"
    members = [str(rewardsmith_model), str(trl_chat_model), str(lora_adapter)]
    make_ensemble(members, ensemble, "min", reference=reference, progress=False)
    scored = np.array(
        [
            [json.loads(x)[k] for k in ("reward_chosen", "reward_rejected")]
            for x in _ensemble_rows(ensemble, pairs, tmp_path / "s.jsonl")
        ]
    )
    result = CliRunner().invoke(
        app, ["eval", "--model", str(ensemble), "--dataset", "file", "--path", str(pairs), "--out", str(tmp_path / "e")]
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert metrics["model_kind"] == "ensemble"
    block = next(iter(metrics["eval"].values()))
    assert block["accuracy"] == pytest.approx(100 * float(np.mean(scored[:, 0] > scored[:, 1])), abs=1e-9)
    # Beside the accuracy, whether the members' disagreement about a pair's margin predicts its errors.
    doubt = block["doubt"]
    assert doubt["kind"] == "members' sd of the margin" and set(doubt["selective"]) == {"0.5", "0.8", "1"}
    assert doubt["selective"]["1"]["accuracy"] == pytest.approx(block["accuracy"], abs=1e-9)
    assert "Is the model's doubt worth anything?" in (tmp_path / "e" / "report.md").read_text()
    lines = ["rater_id,item_id,prompt,response,score,model_score"]
    for rater, slope in (("a", 10.0), ("b", 20.0), ("c", 5.0)):
        for k, row in enumerate(PAIRS):
            lines.append(
                f"{rater},{k},{row['prompt'].replace(',', ' ')},{row['chosen'].replace(',', ' ')},{slope * k},0"
            )
    ratings = tmp_path / "ratings.csv"
    ratings.write_text("\n".join(lines) + "\n")
    fit = CliRunner().invoke(
        app,
        ["calibrate", "fit", "--ratings", str(ratings), "--model", str(ensemble), "--out", str(tmp_path / "m.json")],
    )
    assert fit.exit_code == 0, fit.output
    assert "scored 12 rated items" in fit.stdout and "ensemble" in fit.stdout


def test_train_members_makes_an_ensemble_of_its_seeds_and_a_rerun_reuses_them(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rewardsmith.cli import app

    args = ["train", "--train", "synthetic/source", "--backbone", "tiny-bert", "--max-steps", "2"]
    args += ["--train-pairs", "32", "--eval-pairs", "16", "--seed", "4", "--members", "2", "--quiet"]
    out = tmp_path / "run"
    first = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in (out / "members").iterdir()) == ["seed4", "seed5"]
    spec = json.loads((out / "ensemble" / "ensemble.json").read_text())
    assert [m["source"] for m in spec["members"]] == ["../members/seed4/model", "../members/seed5/model"]
    configs = [yaml.safe_load((out / "members" / s / "config.yaml").read_text()) for s in ("seed4", "seed5")]
    assert [c["train"]["seed"] for c in configs] == [4, 5]
    # Beside the members' accuracies, the ensemble's own on the same held-out pairs.
    lines = [x for x in first.stdout.splitlines() if x.startswith("ensemble (2 members, mean): accuracy ")]
    assert len(lines) == 1 and "synthetic/source (held-out) " in lines[0], first.stdout
    weights = (out / "members" / "seed5" / "model" / "heads.safetensors").read_bytes()
    again = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert again.output.count("already holds this finished run") == 2
    assert lines[0] in again.stdout.splitlines()  # the same members: the same ensemble accuracy
    assert (out / "members" / "seed5" / "model" / "heads.safetensors").read_bytes() == weights


def test_a_served_ensemble_answers_as_score_does_with_its_uncertainties(
    tmp_path: Path, rewardsmith_model: Path, trl_chat_model: Path, lora_adapter: Path, chat_tokenizer_dir: Path, files
) -> None:
    import httpx
    from test_serve import one_line_error, serving
    from transformers import AutoTokenizer

    from rewardsmith.client import GRPOReward, RewardClient
    from rewardsmith.serve.app import build_app
    from rewardsmith.serve.config import ServeConfig

    reference, _ = files
    singles = [{"prompt": r["prompt"], "response": r[side]} for r in PAIRS[:6] for side in ("chosen", "rejected")]
    single_file = tmp_path / "singles.jsonl"
    single_file.write_text("".join(json.dumps(r) + "\n" for r in singles))
    three = tmp_path / "three"
    make_ensemble(
        [str(rewardsmith_model), str(trl_chat_model), str(lora_adapter)], three, "uwo", 0.5, reference, progress=False
    )
    expected = [json.loads(x) for x in _ensemble_rows(three, single_file, tmp_path / "three.jsonl")]
    with serving(build_app(three, ServeConfig(max_wait_ms=20.0))) as url:
        with RewardClient(url, max_items_per_request=5) as client:  # split across requests and rounds
            served = client.score(singles)
            penalised = GRPOReward(client, sd_penalty=2.0)(
                [r["prompt"] for r in singles], [r["response"] for r in singles]
            )
        for got, want in zip(served, expected, strict=True):
            assert abs(got["reward"] - want["reward"]) < 1e-6 and abs(got["reward_sd"] - want["reward_sd"]) < 1e-6
        assert np.allclose(penalised, [w["reward"] - 2.0 * w["reward_sd"] for w in expected], atol=1e-6)
        # A rendered conversation the members read differently (the tiny BERT's template is not the chat one).
        tokenizer = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
        rendered = tokenizer.apply_chat_template(
            [
                {"role": "user", "content": singles[0]["prompt"]},
                {"role": "assistant", "content": singles[0]["response"]},
            ],
            tokenize=False,
        )
        one_line_error(
            httpx.post(f"{url}/get_reward", json={"query": ["plain words", rendered]}, timeout=60),
            422,
            "query[1]",
            "read this rendered text differently",
        )
    # Members of one template: OpenRLHF's rendered queries get the rewards and uncertainties `score` gives.
    chat = tmp_path / "chat"
    make_ensemble([str(trl_chat_model), str(lora_adapter)], chat, "mean", reference=reference, progress=False)
    want = [json.loads(x) for x in _ensemble_rows(chat, single_file, tmp_path / "chat.jsonl")]
    queries = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": r["prompt"]}, {"role": "assistant", "content": r["response"]}], tokenize=False
        )
        for r in singles
    ]
    with serving(build_app(chat, ServeConfig(max_wait_ms=20.0))) as url:
        answer = httpx.post(f"{url}/get_reward", json={"query": queries}, timeout=60).json()
    assert "rewardsmith" not in answer, answer.get("rewardsmith")  # every query was read back into turns
    assert np.allclose(answer["rewards"], [w["reward"] for w in want], atol=1e-6)
    assert np.allclose(answer["uncertainties"], [w["reward_sd"] for w in want], atol=1e-6)


def test_bootstrap_members_train_on_resamples_of_the_pairs(tmp_path: Path) -> None:
    args = ["train", "--train", "synthetic/source", "--backbone", "tiny-bert", "--max-steps", "1"]
    args += ["--train-pairs", "40", "--eval-pairs", "8", "--seed", "4", "--quiet"]
    one_line_error(rk(*args, "--bootstrap", "--out", tmp_path / "one"), "--bootstrap needs --members")
    out = tmp_path / "run"
    result = rk(*args, "--members", "2", "--bootstrap", "--out", out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "members").iterdir()) == ["boot4", "boot5"]
    for name, seed in (("boot4", 4), ("boot5", 5)):
        config = yaml.safe_load((out / "members" / name / "config.yaml").read_text())
        assert config["data"]["bootstrap"] == seed and config["train"]["seed"] == seed
        train = json.loads((out / "members" / name / "metrics.json").read_text())["data"]["train"]
        assert train["used"] == 40 and 15 < train["bootstrap"]["distinct"] < 40  # about 63% of 40 distinct
    assert (out / "ensemble" / "ensemble.json").exists()
