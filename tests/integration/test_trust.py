"""The second trust pass: the tool deletes and replaces only what it wrote, inside the folder it owns; saved
models are self-contained; options read the same in every command; what a run did is reported."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import ENV, TINY, ok, rk
from rewardsmith.io.runfolder import RunFolder

PAIRS = [{"prompt": f"question {i}", "chosen": f"a kind answer {i}", "rejected": f"no {i}"} for i in range(24)]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("trained") / "run"
    ok(rk("train", "--train", "synthetic/source", *TINY, "--out", run))
    return run


# ---------------------------------------------------------------------------------------------------------
# --overwrite deletes only the run's own files, inside the run folder


def test_a_manifest_naming_paths_outside_deletes_nothing_there(tmp_path: Path, trained: Path) -> None:
    run = tmp_path / "r"
    shutil.copytree(trained, run)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "k.txt").write_text("keep")
    (run / "link").symlink_to(victim, target_is_directory=True)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["files"] += ["../victim", str(victim), "link", "link/k.txt", "model/../../victim"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    result = rk("train", "--train", "synthetic/source", *TINY, "--out", run, "--overwrite", "--seed", "5")
    ok(result)
    assert (victim / "k.txt").read_text() == "keep"
    assert (run / "link").is_symlink()  # not the tool's: left where it is
    assert json.loads((run / "manifest.json").read_text())["config"]["train"]["seed"] == 5


_SEGMENTS = st.sampled_from(["..", ".", "outside", "k.txt", "link", "model", "plots", "", "a"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.lists(
        st.one_of(
            st.lists(_SEGMENTS, min_size=1, max_size=4).map("/".join),
            st.sampled_from(["ABS", "ABS/k.txt", "LINK", "LINK/k.txt", "LINKFILE"]),
        ),
        max_size=8,
    )
)
def test_overwrite_never_deletes_outside_the_folder_for_any_manifest(tmp_path_factory, entries: list[str]) -> None:
    base = tmp_path_factory.mktemp("prop")
    outside = base / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "k.txt").write_text("keep")
    (outside / "sub" / "deep.txt").write_text("keep too")
    run = base / "run"
    with RunFolder.open(run, "test", {"x": 1}) as folder:
        folder.write_text("model/weights.txt", "w")
        folder.write_text("report.md", "r")
        folder.mark_complete()
    (run / "link").symlink_to(outside, target_is_directory=True)
    (run / "linkfile").symlink_to(outside / "k.txt")
    names = {
        "ABS": str(outside),
        "ABS/k.txt": str(outside / "k.txt"),
        "LINK": "link",
        "LINK/k.txt": "link/k.txt",
        "LINKFILE": "linkfile",
    }
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["files"] += [names.get(e, e) for e in entries]
    (run / "manifest.json").write_text(json.dumps(manifest))
    before = snapshot(outside)
    with RunFolder.open(run, "test", {"x": 1}, overwrite=True):
        pass
    assert snapshot(outside) == before
    assert (run / "link").is_symlink() and (run / "linkfile").is_symlink()
    assert not (run / "report.md").exists()  # the run's own file went


@pytest.mark.slow
def test_overwrite_with_the_same_settings_trains_again(tmp_path: Path, trained: Path) -> None:
    import time

    run = tmp_path / "r"
    shutil.copytree(trained, run)
    again = rk("train", "--train", "synthetic/source", *TINY, "--out", run)
    ok(again)
    assert "nothing retrained (--overwrite redoes it)" in again.stdout
    created = json.loads((run / "manifest.json").read_text())["created"]
    time.sleep(1.1)
    redo = rk("train", "--train", "synthetic/source", *TINY, "--out", run, "--overwrite")
    ok(redo)
    assert "nothing retrained" not in redo.stdout
    assert json.loads((run / "manifest.json").read_text())["created"] != created  # a new run, trained again
    assert len((run / "log.jsonl").read_text().splitlines()) == 2  # its two optimiser steps


def test_overwrite_keeps_files_changed_or_added_since_the_run(tmp_path: Path, trained: Path) -> None:
    run = tmp_path / "r"
    shutil.copytree(trained, run)
    (run / "plots" / "my-own.png").write_bytes(b"mine")
    (run / "report.md").write_text("my edits")
    result = rk("train", "--train", "synthetic/source", *TINY, "--out", run, "--overwrite", "--seed", "4")
    # Their bytes are someone's now: the run is refused (one line naming the first such path), nothing replaced.
    assert result.exit_code == 2 and ("plots" in result.stderr or "report.md" in result.stderr), result.stderr
    assert (run / "plots" / "my-own.png").read_bytes() == b"mine"
    assert (run / "report.md").read_text() == "my edits"


# ---------------------------------------------------------------------------------------------------------
# Outputs a user names


def test_examples_with_overwrite_never_replace_someone_elses_file(tmp_path: Path) -> None:
    out = tmp_path / "ex"
    out.mkdir()
    (out / "pairs.jsonl").write_text("my own pairs\n")
    result = rk("examples", "--out", out, "--overwrite")
    assert result.exit_code == 2 and "pairs.jsonl" in result.stderr
    assert (out / "pairs.jsonl").read_text() == "my own pairs\n"
    ok(rk("examples", "--out", tmp_path / "fresh"))
    assert not (tmp_path / "fresh" / ".rewardsmith.lock").exists()  # the lock goes when the command ends
    ok(rk("examples", "--out", tmp_path / "fresh", "--overwrite"))  # its own files: written again
    assert not (tmp_path / "fresh" / ".rewardsmith.lock").exists()


def test_score_replaces_only_its_own_output(tmp_path: Path, trained: Path) -> None:
    inp = jsonl(tmp_path / "in.jsonl", PAIRS[:3])
    out = tmp_path / "o.jsonl"
    ok(rk("score", "--model", trained / "model", "--input", inp, "-o", out, "-q"))
    first = out.read_text()
    ok(rk("score", "--model", trained / "model", "--input", inp, "--out", out, "--overwrite", "-q"))
    assert out.read_text() == first
    assert (tmp_path / ".o.jsonl.rewardsmith.json").is_file()
    # --output still works (the name older commands used)
    ok(rk("score", "--model", trained / "model", "--input", inp, "--output", tmp_path / "o2.jsonl", "-q"))


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".json"])
def test_score_reads_every_file_type_the_file_dataset_reads(tmp_path: Path, trained: Path, suffix: str) -> None:
    import pandas as pd

    rows = [{"prompt": "q", "response": "an answer"}, {"prompt": "q2", "response": "another"}]
    inp = tmp_path / f"in{suffix}"
    frame = pd.DataFrame(rows)
    {
        ".parquet": lambda: frame.to_parquet(inp),
        ".csv": lambda: frame.to_csv(inp, index=False),
        ".json": lambda: inp.write_text(json.dumps(rows)),
    }[suffix]()
    ok(rk("score", "--model", trained / "model", "--input", inp, "--out", tmp_path / "o.jsonl", "-q"))
    scored = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert [r["response"] for r in scored] == ["an answer", "another"]
    assert all(isinstance(r["reward"], float) for r in scored)


def test_score_reports_truncation(tmp_path: Path, trained: Path) -> None:
    long_prompt = " ".join(["word"] * 1500)
    inp = jsonl(tmp_path / "in.jsonl", [{"prompt": long_prompt, "response": "short"}])
    result = rk("score", "--model", trained / "model", "--input", inp, "--out", tmp_path / "o.jsonl", "-q")
    ok(result)
    assert "truncated texts (at 256 tokens): prompt cut in 1 of 1" in result.stdout


# ---------------------------------------------------------------------------------------------------------
# Files users have


def test_a_training_csv_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    rows = "".join(f"question {i},a kind answer {i},no {i}\n" for i in range(24))
    data = tmp_path / "pairs.csv"
    data.write_bytes(b"\xef\xbb\xbf" + f"prompt,chosen,rejected\n{rows}".encode())
    jsonl_bom = tmp_path / "pairs.jsonl"
    jsonl_bom.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r) + "\n" for r in PAIRS).encode())
    for path in (data, jsonl_bom):
        result = rk("train", "--train", "file", "--path", path, *TINY, "--out", tmp_path / path.suffix[1:])
        ok(result)
        assert "24 rows read" in result.stdout


def test_an_icrm_on_a_local_frozen_backbone_scores_from_anywhere(
    tmp_path: Path, trained: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rewardsmith.config import ICRMModelConfig
    from rewardsmith.models.factory import build_model, save_model

    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(trained / "model", work / "encoder")
    monkeypatch.chdir(work)
    cfg = ICRMModelConfig(backbone="encoder", max_length=32, min_prompt_tokens=8, context_dim=8, hidden_dim=8)
    model, tok = build_model(cfg)
    save_model(model, tok, work / "icrm", cfg)
    moved = tmp_path / "elsewhere" / "icrm"
    shutil.move(str(work / "icrm"), moved)
    shutil.rmtree(work / "encoder")
    monkeypatch.chdir(tmp_path)
    inp = jsonl(tmp_path / "in.jsonl", PAIRS[:2])
    ok(rk("score", "--model", moved, "--input", inp, "--out", tmp_path / "o.jsonl", "-q"))


@pytest.mark.slow
def test_a_full_disk_while_saving_is_one_line_and_leaves_no_half_model(tmp_path: Path) -> None:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))  # the tiny model's weights are ~4 MB

    run = tmp_path / "r"
    cmd = [sys.executable, "-m", "rewardsmith", "train", "--train", "synthetic/source", *TINY, "--out", str(run)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **ENV}, preexec_fn=limit, timeout=300)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    assert not (run / "model").exists()  # written atomically: no half model


# ---------------------------------------------------------------------------------------------------------
# Options


def test_version() -> None:
    from importlib import metadata

    result = rk("--version")
    ok(result)
    assert result.stdout.strip() == f"rewardsmith {metadata.version('rewardsmith')}"


@pytest.mark.parametrize(
    "command",
    [
        ["train"],
        ["eval"],
        ["score"],
        ["calibrate"],
        ["calibrate", "fit"],
        ["shift"],
        ["icrm", "train"],
        ["icrm", "eval"],
        ["examples"],
        ["demo"],
    ],
)
def test_options_read_the_same_everywhere(command: list[str]) -> None:
    text = rk(*command, "--help").stdout.split("Config keys (YAML names")[0]
    assert "-o, --out" in text
    assert "[default: ]" not in text
    assert "[default: false]" not in text or "--bf16" not in text  # a flag pair shows the flag that is the default
    if command[0] in ("train", "eval", "score", "calibrate", "shift", "icrm", "demo"):
        assert "-q, --quiet" in text


def test_every_config_key_is_reachable_from_the_command_line(tmp_path: Path) -> None:
    from rewardsmith.config import RunConfig, config_keys

    text = " ".join(rk("train", "--help").stdout.split())
    for key, _, _ in config_keys(RunConfig):
        assert key in text, key
    run = tmp_path / "r"
    ok(
        rk(
            "train",
            "--train",
            "synthetic/source",
            *TINY,
            "--set",
            "train.grad_accum=2",
            "--set",
            "train.warmup_ratio=0.5",
            "--set",
            "data.train.columns={}",
            "--out",
            run,
        )
    )
    saved = json.loads((run / "manifest.json").read_text())["config"]["train"]
    assert saved["grad_accum"] == 2 and saved["warmup_ratio"] == 0.5


# ---------------------------------------------------------------------------------------------------------
# Figures


def test_a_legend_below_a_narrow_plot_fits_its_width(tmp_path: Path) -> None:
    from rewardsmith.report import plots

    captured = {}
    real_save = plots._save

    def keep(figure, path):
        captured["figure"] = figure
        return real_save(figure, path)

    plots._save = keep
    try:
        plots.plot_grouped_bars(
            ["synthetic/\nsource\n(held-out)"],
            [
                plots.Series("accuracy", None, [18.8], [0.0], [37.5]),
                plots.Series("length rule (longer wins)", None, [100.0]),
                plots.Series("length-controlled", None, [50.0]),
            ],
            tmp_path / "p.png",
            ylabel="accuracy (%)",
            reference=50,
        )
    finally:
        plots._save = real_save
    figure = captured["figure"]
    figure.canvas.draw()
    legend = figure.legends[0].get_window_extent()
    assert legend.x0 >= 0 and legend.x1 <= figure.bbox.width


def test_maps_of_another_scale_are_named_when_scoring(tmp_path: Path, trained: Path) -> None:
    import random

    rng = random.Random(0)
    lines = ["rater_id,item_id,score,model_score"]
    for rater in "abcdefgh":
        for item in range(12):
            r = 50 + rng.gauss(0, 1)  # a model whose scores sit near 50: not this model's scale
            lines.append(f"{rater},{item},{2 * r + rng.gauss(0, 1):.3f},{r:.3f}")
    ratings = tmp_path / "ratings.csv"
    ratings.write_text("\n".join(lines) + "\n")
    ok(rk("calibrate", "fit", "--ratings", ratings, "--out", tmp_path / "maps.json"))
    inp = jsonl(tmp_path / "in.jsonl", PAIRS[:4])
    result = rk(
        "score",
        "--model",
        trained / "model",
        "--input",
        inp,
        "--out",
        tmp_path / "o.jsonl",
        "-q",
        "--calibration",
        tmp_path / "maps.json",
        "--rater",
        "a",
    )
    ok(result)
    assert "outside the model-score scale the calibration was fitted on" in result.stdout
    # Said before the scale test: the maps were fitted on the ratings' own model scores, not on this model's rewards,
    # and what scale the rewards are on now.
    assert f"the calibration was fitted on the model_score column of {ratings}, not on rewards of" in result.stdout
    assert f"calibrate fit --model {trained / 'model'}" in result.stdout
    assert f"calibrated: rewards mapped onto rater a's rating scale in {ratings}" in result.stdout


def test_maps_fitted_on_the_scored_models_rewards_pass_and_another_models_are_named(
    tmp_path: Path, trained: Path
) -> None:
    """`calibrate fit --model M` records M: scoring with M says only which scale the rewards are on; scoring another
    model (here a copy of M in another folder) with those maps is warned about, naming both."""
    lines = ["rater_id,item_id,score,model_score,prompt,response"]
    for rater, slope in (("a", 10), ("b", 30)):
        for item in range(12):
            lines.append(f"{rater},{item},{slope * (item % 5) + item},0,question {item},answer number {item}")
    ratings = tmp_path / "ratings.csv"
    ratings.write_text("\n".join(lines) + "\n")
    model = trained / "model"
    ok(rk("calibrate", "fit", "--model", model, "--ratings", ratings, "--out", tmp_path / "maps.json"))
    info = json.loads((tmp_path / "maps.json").read_text())["info"]
    assert info["model"] == str(model.resolve()) and info["rating_range"] == [0.0, 129.0]
    inp = jsonl(tmp_path / "in.jsonl", PAIRS[:4])
    args = ["--input", inp, "-q", "--calibration", tmp_path / "maps.json", "--rater", "b"]
    same = rk("score", "--model", model, "--out", tmp_path / "same.jsonl", *args)
    ok(same)
    assert "warning" not in same.stdout, same.stdout
    assert f"rewards mapped onto rater b's rating scale in {ratings} (0 to 129; pebs maps)" in same.stdout
    other_model = tmp_path / "other-model"
    shutil.copytree(model, other_model)
    other = rk("score", "--model", other_model, "--out", tmp_path / "other.jsonl", *args)
    ok(other)
    assert f"fitted on rewards of {model.resolve()}, not of {other_model}" in other.stdout, other.stdout
