"""`rewardsmith bench` end to end on tiny models (tiny-bert trained for two steps) over tiny releases written in
the published schemas: the report card's files, per-subset CIs, the suites not run, paired differences with
verdicts, each distinct text scored once, a finished run reported and not redone, a second model added to a
finished run (and a real SIGKILL after the first model) resuming without rescoring the first, a model changed in
place scored again, one-line errors; and the same command on a model TRL's RewardTrainer wrote."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_bench_fixtures import RB1_ROWS, rb1_row, write_reward_bench, write_rm_bench_chat

from helpers import ENV, TINY, one_line_error, rk
from rewardsmith.bench.compare import compare_units
from rewardsmith.bench.measures import units_from_dict
from rewardsmith.io.runfolder import file_sha256
from rewardsmith.jobs.bench import KILL_AFTER_MODEL_ENV
from rewardsmith.stats import MIN_UNITS

pytestmark = pytest.mark.slow  # trains models and runs whole commands: `make test`, not test-fast

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RM_PROMPTS = 4
HH_PAIRS = 8
NOT_RUN = {"reward-bench-2", "ppe-human-preference", "ppe-correctness"}


# ---------------------------------------------------------------------------------------------------- fixtures


def write_releases(root: Path) -> set[tuple[str, str]]:
    """RewardBench (its fixture rows, one more row sharing both texts with RM-Bench and one repeating a text of
    another row), RM-Bench chat and HH-RLHF harmless (the local suite). Returns every distinct (prompt, response)."""
    write_rm_bench_chat(root, prompts=RM_PROMPTS)
    extra = [
        rb1_row("alpacaeval-hard", 100, "c00", "r00", prompt="chat prompt 0"),  # both texts also in RM-Bench
        rb1_row("mt-bench-hard", 101, "a1 chosen, long and right", "another wrong answer", prompt="prompt 1"),
    ]  # the second's chosen text is row 1's
    rb1 = write_reward_bench(root, more=extra)
    hh = root / "hh-rlhf" / "harmless-base"
    hh.mkdir(parents=True)
    with gzip.open(hh / "test.jsonl.gz", "wt", encoding="utf-8") as fh:
        for i in range(HH_PAIRS):
            # The rejected response is the shorter in 4 pairs and the longer in 3: a length-controlled accuracy.
            fh.write(
                json.dumps(
                    {
                        "chosen": f"\n\nHuman: question {i}?\n\nAssistant: a kind answer {i}",
                        "rejected": f"\n\nHuman: question {i}?\n\nAssistant: no {'x' * (3 * i)}",
                    }
                )
                + "\n"
            )
    texts = {(r["prompt"], r[k]) for r in rb1 for k in ("chosen", "rejected")}
    for p in range(RM_PROMPTS):
        texts |= {(f"chat prompt {p}", f"{side}{p}{s}" + "." * s) for side in "cr" for s in range(3)}
    texts |= {
        (f"question {i}?", answer) for i in range(HH_PAIRS) for answer in (f"a kind answer {i}", f"no {'x' * (3 * i)}")
    }
    return texts


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[tuple[str, str]]]:
    root = tmp_path_factory.mktemp("bench-data")
    return root, write_releases(root)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two tiny reward models, runs/a/model and runs/b/model (different seeds)."""
    base = tmp_path_factory.mktemp("bench-models")
    for name, seed in (("a", "0"), ("b", "1")):
        result = rk("train", "--train", "synthetic/source", *TINY, "--seed", seed, "--out", base / name)
        assert result.exit_code == 0, result.output
    return base / "a" / "model", base / "b" / "model"


def bench(out: Path, data: Path, *model_dirs: Path, extra: tuple[str, ...] = ()):
    args: list[str | Path] = ["bench", "--data-dir", data, "--out", out, "--bootstrap", "200", "--quiet", *extra]
    for m in model_dirs:
        args += ["--model", m]
    return rk(*args)


def measures(metrics: dict[str, Any], model: str, suite: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m["subset"], m["metric"]): m for m in metrics["results"][model]["suites"][suite]["measures"]}


@pytest.fixture(scope="module")
def two_model_run(
    tmp_path_factory: pytest.TempPathFactory, models: tuple[Path, Path], releases: tuple[Path, set[tuple[str, str]]]
) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("bench-run") / "run"
    result = bench(out, releases[0], *models)
    assert result.exit_code == 0, result.output
    return out, result


# ------------------------------------------------------------------------------------------------------- tests


def test_report_card_files_cis_and_suites_not_run(two_model_run: tuple[Path, Any]) -> None:
    out, result = two_model_run
    for name in ("manifest.json", "metrics.json", "scores.json", "report.md", "report.html"):
        assert (out / name).is_file(), name
    assert len(list((out / "models").glob("*.json"))) == 2
    text = (out / "report.md").read_text(encoding="utf-8")
    pngs = sorted((out / "plots").glob("*.png"))
    assert {
        "reward_bench_scores.png",
        "rm_bench_scores.png",
        "local_scores.png",
        "rm_bench_difficulty.png",
        "differences_b_vs_a.png",
    } <= {p.name for p in pngs}
    for png in pngs:
        assert png.read_bytes()[:8] == PNG_MAGIC and f"plots/{png.name}" in text
    for heading in (
        "## Summary",
        "## RewardBench",
        "## RM-Bench",
        "## Local preference sets",
        "## Paired differences: b vs a",
        "## Not run",
        "## Models and texts scored",
    ):
        assert f"\n{heading}\n" in text, heading
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<table>" in page
    # Paths with globs read literally (no emphasis made of their asterisks).
    assert "put the lmarena-ai/PPE-*-Best-of-K release folder" in page and "data/train-*.parquet) at" in page
    assert "<em>" not in page.split("Not run")[-1].split("Models and texts scored")[0]

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["models"] == ["a", "b"]
    assert {m["suite"] for m in metrics["missing"]} == NOT_RUN
    for suite in NOT_RUN:
        assert f"skipped {suite}: missing: put the " in result.stdout
    assert "skipped reward-bench-2: missing: put the allenai/reward-bench-2 release folder" in result.stdout
    for model in ("a", "b"):
        assert set(metrics["results"][model]["suites"]) == {"reward-bench", "rm-bench", "local"}
        for suite in ("rm-bench", "local"):
            for m in metrics["results"][model]["suites"][suite]["measures"]:
                low, high = m["score_ci"]
                assert low is not None and high is not None and low <= m["score"] + 1e-9 <= high + 2e-9, m
                if m["metric"] in ("avg", "accuracy"):
                    assert m["length_rule"] is not None and m["length_controlled"] is not None, m
    rm = measures(metrics, "a", "rm-bench")
    assert rm[("overall", "hard - easy")]["score"] == pytest.approx(
        rm[("overall", "hard")]["score"] - rm[("overall", "easy")]["score"]
    )
    local = measures(metrics, "a", "local")
    assert local[("overall", "accuracy")]["score"] == pytest.approx(
        local[("hh-rlhf/harmless-base", "accuracy")]["score"]
    )  # the mean of the one set present


def test_two_models_give_paired_differences_with_verdicts(two_model_run: tuple[Path, Any]) -> None:
    out, _ = two_model_run
    metrics = json.loads((out / "metrics.json").read_text())
    records = metrics["comparisons"]["b vs a"]
    assert {r["suite"] for r in records} == {"reward-bench", "rm-bench", "local"}
    a = {s: measures(metrics, "a", s) for s in ("reward-bench", "rm-bench", "local")}
    b = {s: measures(metrics, "b", s) for s in ("reward-bench", "rm-bench", "local")}
    for r in records:
        # Both models are scored on the same units, so the paired difference is the difference of the scores.
        key = (r["subset"], r["metric"])
        assert r["difference"] == pytest.approx(b[r["suite"]][key]["score"] - a[r["suite"]][key]["score"], abs=1e-9)
        low, high = r["difference_ci"]
        want = "better" if low > 0 else "worse" if high < 0 else "inconclusive"
        assert r["verdict"] == (want if r["n"] >= MIN_UNITS else "too few units"), r
    # scores.json holds the per-unit values: the comparisons recomputed from it are the ones in metrics.json.
    scores = json.loads((out / "scores.json").read_text())
    units = {
        m: {s: {k: units_from_dict(u) for k, u in per.items()} for s, per in scores["units"][m].items()}
        for m in ("a", "b")
    }
    again = compare_units(units["b"], units["a"], n_boot=200)
    assert [(r["suite"], r["key"], r["difference"], r["verdict"]) for r in again] == [
        (r["suite"], r["key"], r["difference"], r["verdict"]) for r in records
    ]


def test_each_distinct_text_is_scored_once(
    two_model_run: tuple[Path, Any], releases: tuple[Path, set[tuple[str, str]]]
) -> None:
    out, result = two_model_run
    _, distinct = releases
    metrics = json.loads((out / "metrics.json").read_text())
    requested = 2 * (len(RB1_ROWS) + 2) + 6 * RM_PROMPTS + 2 * HH_PAIRS
    for model in ("a", "b"):
        texts = metrics["results"][model]["texts"]
        assert texts == {"requested": requested, "scored": len(distinct), "reused": requested - len(distinct)}
        assert texts["reused"] == 3  # two texts shared with RM-Bench, one repeated within RewardBench
        # The encoder saw each distinct text once: what the model scored is what the counter says.
        assert metrics["model_info"][model]["truncation"]["texts"] == len(distinct)
        assert f"{model}: texts requested {requested}, scored {len(distinct)}, reused 3" in result.stdout


def test_a_finished_run_is_reported_not_redone(
    two_model_run: tuple[Path, Any], models: tuple[Path, Path], releases: tuple[Path, set[tuple[str, str]]]
) -> None:
    out, _ = two_model_run
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*.json") if p.name != "manifest.json"}
    report = (out / "report.md").read_text(encoding="utf-8")
    again = bench(out, releases[0], *models)
    assert again.exit_code == 0, again.output
    assert (
        "already holds this finished run; nothing rescored, report.md, report.html and plots/ rendered again"
        in again.stdout
    )
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == before
    # The report card is rendered again from metrics.json: the same text, and the manifest's checksums still
    # match every file (what --overwrite may delete later).
    assert (out / "report.md").read_text(encoding="utf-8") == report
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and (out / "plots" / "rm_bench_difficulty.png").is_file()
    assert all(file_sha256(out / name) == digest for name, digest in manifest["checksums"].items())


def test_a_model_added_to_a_finished_run_reuses_the_first(
    tmp_path: Path, models: tuple[Path, Path], releases: tuple[Path, set[tuple[str, str]]]
) -> None:
    out = tmp_path / "run"
    first = bench(out, releases[0], models[0])
    assert first.exit_code == 0, first.output
    saved = next((out / "models").glob("a-*.json"))
    kept = (saved.read_bytes(), saved.stat().st_mtime_ns)
    both = bench(out, releases[0], *models)
    assert both.exit_code == 0, both.output
    assert "a: results reused from the earlier run in this folder" in both.stdout
    assert "b: results reused" not in both.stdout
    assert (saved.read_bytes(), saved.stat().st_mtime_ns) == kept
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["models"] == ["a", "b"] and "b vs a" in metrics["comparisons"]
    assert [metrics["model_info"][m]["from_earlier_run"] for m in ("a", "b")] == [True, False]


def test_a_model_changed_in_place_is_scored_again(
    tmp_path: Path, models: tuple[Path, Path], releases: tuple[Path, set[tuple[str, str]]]
) -> None:
    model = tmp_path / "copy" / "model"
    shutil.copytree(models[0], model)
    out = tmp_path / "run"
    assert bench(out, releases[0], model).exit_code == 0
    heads = model / "heads.safetensors"
    from safetensors.torch import load_file, save_file

    save_file({k: v * 2 for k, v in load_file(str(heads)).items()}, str(heads))  # retrained in place: other bytes
    again = bench(out, releases[0], model)
    assert again.exit_code == 0, again.output
    assert "already holds this finished run" not in again.stdout and "results reused" not in again.stdout
    assert json.loads((out / "metrics.json").read_text())["model_info"]["copy"]["from_earlier_run"] is False
    stat = heads.stat()
    os.utime(heads, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched, same bytes: the same model
    assert "already holds this finished run" in bench(out, releases[0], model).stdout


def test_killed_after_the_first_model_resumes_with_the_second(
    tmp_path: Path, models: tuple[Path, Path], releases: tuple[Path, set[tuple[str, str]]]
) -> None:
    """A real SIGKILL right after the first model's results are saved, then the same command."""
    out = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "rewardsmith.cli",
        "bench",
        "--data-dir",
        str(releases[0]),
        "--out",
        str(out),
        "--bootstrap",
        "50",
        "--quiet",
        "--model",
        str(models[0]),
        "--model",
        str(models[1]),
    ]
    env = {**os.environ, **ENV}
    killed = subprocess.run(args, env={**env, KILL_AFTER_MODEL_ENV: "1"}, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    assert [p.name.split("-")[0] for p in (out / "models").glob("*.json")] == ["a"]
    assert not (out / "metrics.json").exists()
    resumed = subprocess.run(args, env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "a: results reused from the earlier run in this folder" in resumed.stdout
    metrics = json.loads((out / "metrics.json").read_text())
    assert [metrics["model_info"][m]["from_earlier_run"] for m in ("a", "b")] == [True, False]
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


def test_one_line_errors(
    tmp_path: Path, models: tuple[Path, Path], releases: tuple[Path, set[tuple[str, str]]]
) -> None:
    data = releases[0]
    one_line_error(
        bench(tmp_path / "r1", data, models[0], extra=("--suite", "nope")),
        "unknown benchmark suite 'nope'",
        "rewardbench2",
        "rm-bench",
    )
    not_a_model = tmp_path / "notes"
    not_a_model.mkdir()
    (not_a_model / "readme.txt").write_text("not weights")
    one_line_error(
        bench(tmp_path / "r2", data, not_a_model),
        str(not_a_model),
        "not a reward model rewardsmith can read",
        "readme.txt",
    )
    # The second model is checked before the first is scored.
    one_line_error(bench(tmp_path / "r3", data, models[0], tmp_path / "missing" / "model"), "model folder not found")
    one_line_error(
        bench(tmp_path / "r4", data, models[0], extra=("--suite", "ppe")),
        "no benchmark data for the suites asked for",
        "PPE-Human-Preference-V1",
    )
    one_line_error(bench(tmp_path / "r5", data, models[0], models[0]), "given twice")
    assert not any((tmp_path / f"r{i}").exists() for i in range(1, 6))  # nothing written for a refused run


def _rm_bench_avg(inference: Any) -> float:
    """RM-Bench avg by hand from a model's own rewards: per prompt, the share of the 9 (chosen style, rejected
    style) comparisons the chosen response wins, a tie counting as wrong."""
    from rewardsmith.data.schema import user_prompt

    per_prompt = []
    for p in range(RM_PROMPTS):
        texts = [(user_prompt(f"chat prompt {p}"), f"{side}{p}{s}" + "." * s) for side in "cr" for s in range(3)]
        r = inference.score_texts(texts).rewards
        per_prompt.append(np.mean([r[i] > r[3 + j] for i in range(3) for j in range(3)]))
    return 100 * float(np.mean(per_prompt))


def test_the_same_command_on_a_trl_trained_model(
    tmp_path: Path, trl_chat_model: Path, releases: tuple[Path, set[tuple[str, str]]]
) -> None:
    from rewardsmith.inference import load_inference

    out = tmp_path / "run"
    result = bench(out, releases[0], trl_chat_model, extra=("--suite", "rm-bench", "--suite", "rewardbench"))
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    label = metrics["models"][0]
    info = metrics["model_info"][label]
    assert (info["kind"], info["template"]) == ("sequence-classification", "chat")
    assert metrics["missing"] == [] and set(metrics["results"][label]["suites"]) == {"reward-bench", "rm-bench"}
    inference = load_inference(trl_chat_model)
    got = measures(metrics, label, "rm-bench")[("overall", "avg")]["score"]
    assert got == pytest.approx(_rm_bench_avg(inference))
    assert metrics["results"][label]["texts"]["reused"] > 0  # RewardBench's shared texts were not scored twice


def test_the_same_command_on_an_ensemble(
    tmp_path: Path,
    models: tuple[Path, Path],
    trl_chat_model: Path,
    lora_adapter: Path,
    releases: tuple[Path, set[tuple[str, str]]],
) -> None:
    from rewardsmith.inference import load_inference
    from rewardsmith.jobs.ensemble import make_ensemble

    ensemble = tmp_path / "ensemble"
    make_ensemble([str(models[0]), str(trl_chat_model), str(lora_adapter)], ensemble, "min", progress=False)
    out = tmp_path / "run"
    result = bench(out, releases[0], ensemble, extra=("--suite", "rm-bench"))
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    label = metrics["models"][0]
    assert metrics["model_info"][label]["kind"] == "ensemble"
    inference = load_inference(ensemble)  # the rule over the members, as `score` gives it
    got = measures(metrics, label, "rm-bench")[("overall", "avg")]["score"]
    assert got == pytest.approx(_rm_bench_avg(inference))
