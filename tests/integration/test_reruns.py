"""Nothing stale, nothing non-finite, nothing outside: a rerun after any input changed recomputes or refuses in one
line; a reward that is not a finite number is an error naming its text (commands: exit 2; the server: 422 for that
request, the others answered); an ensemble checks its members' content and reads relative members beside itself;
run folders are written only inside themselves."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import one_line_error, rk, tiny_reward_model
from rewardsmith.errors import ConfigError, RunFolderError
from rewardsmith.io.runfolder import RunFolder

pytestmark = pytest.mark.slow  # whole commands on tiny models

PAIRS = [
    {
        "prompt": f"How should I store bread, question {i}?",
        "chosen": f"Keep it in a paper bag at room temperature and freeze what you will not eat in {i} days.",
        "rejected": "Bread is bread." if i % 2 else "Put it in the fridge next to the fish.",
    }
    for i in range(12)
]


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in PAIRS))
    return path


@pytest.fixture(scope="module")
def nan_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_reward_model(tmp_path_factory.mktemp("nan") / "model", 3, poison=float("nan"))


# ------------------------------------------------------------------------------------------------ non-finite


def test_a_nan_reward_is_an_error_naming_its_row_in_score_and_eval(
    nan_model: Path, pairs_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "scores.jsonl"
    one_line_error(rk("score", "-m", nan_model, "-i", pairs_file, "-o", out), "pairs.jsonl", "row 1", "chosen", "nan")
    assert not out.exists()
    line = one_line_error(
        rk("eval", "--model", nan_model, "--dataset", "file", "--path", pairs_file, "--out", tmp_path / "e"),
        "pair 1",
        "nan",
    )
    assert "not a finite number" in line


def test_an_overflowing_ensemble_lambda_is_refused(tmp_path: Path, pairs_file: Path) -> None:
    from rewardsmith.jobs.ensemble import make_ensemble

    a, b = tiny_reward_model(tmp_path / "a" / "model", 1), tiny_reward_model(tmp_path / "b" / "model", 2)
    ens = tmp_path / "ens"
    make_ensemble([str(a), str(b)], ens, "uwo", 1.0, pairs_file, progress=False)
    spec = json.loads((ens / "ensemble.json").read_text())
    (ens / "ensemble.json").write_text(json.dumps({**spec, "lambda": 1e308}))
    one_line_error(rk("score", "-m", ens, "-i", pairs_file, "-o", tmp_path / "s.jsonl"), "lambda", "1e+308")
    (ens / "ensemble.json").write_text(json.dumps({**spec, "lamda": 5}))
    one_line_error(rk("score", "-m", ens, "-i", pairs_file, "-o", tmp_path / "s.jsonl"), "unknown key 'lamda'")


def test_the_server_answers_422_for_a_nan_text_and_the_others_in_its_round(nan_model: Path, tmp_path: Path) -> None:
    import asyncio

    import httpx

    from rewardsmith.serve.app import build_app
    from rewardsmith.serve.config import ServeConfig

    healthy = tiny_reward_model(tmp_path / "ok" / "model", 4)

    async def ask(model: Path, bodies: list[dict]) -> list[httpx.Response]:
        application = build_app(model, ServeConfig(max_wait_ms=50.0))
        async with application.router.lifespan_context(application):
            transport = httpx.ASGITransport(app=application)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return list(await asyncio.gather(*(client.post("/v1/score", json=b) for b in bodies)))

    items = [{"prompt": "q", "response": "a"}, {"prompt": "q", "chosen": "b", "rejected": "c"}]
    bad = asyncio.run(ask(nan_model, [{"items": items}]))[0]
    assert bad.status_code == 422 and "items[0]" in bad.json()["error"] and "nan" in bad.json()["error"]
    # One request's text cannot break another's answer: a healthy model's round answers both.
    good = asyncio.run(ask(healthy, [{"items": items}, {"items": items[1:]}]))
    assert [r.status_code for r in good] == [200, 200]


def test_the_monitors_skip_and_count_non_finite_rewards() -> None:
    from rewardsmith.serve.monitors import HackingMonitor, Observation

    monitor = HackingMonitor(window=16, check_every=4)
    monitor.observe([Observation("g", "an answer", 1.0), Observation("g", "another", float("nan"))])
    monitor.observe([Observation("g", "x", float("inf")), Observation("h", "y", 2.0)])
    snapshot = monitor.snapshot()
    assert snapshot["nonfinite_skipped"] == 2 and snapshot["stats"]["texts"] == 2.0
    assert snapshot["stats"]["reward_mean"] == 1.5


# ------------------------------------------------------------------------------------------------ ensembles


def test_an_ensemble_refuses_a_member_changed_since_and_reads_relative_members_beside_itself(
    tmp_path: Path, pairs_file: Path
) -> None:
    from rewardsmith.jobs.ensemble import make_ensemble

    root = tmp_path / "root"
    a, b = tiny_reward_model(root / "a", 1), tiny_reward_model(root / "b", 2)
    ens = root / "ens"
    make_ensemble([str(a), str(b)], ens, reference=pairs_file, progress=False)
    spec = json.loads((ens / "ensemble.json").read_text())
    assert [m["source"] for m in spec["members"]] == ["../a", "../b"]
    assert all(len(m["fingerprint"]) == 16 for m in spec["members"])
    first = rk("score", "-m", ens, "-i", pairs_file, "-o", tmp_path / "first.jsonl")
    assert first.exit_code == 0, first.output

    # Moved with its members: still the same scores. Moved alone, into a folder whose ../a is another model: refused.
    moved_root = tmp_path / "moved"
    shutil.copytree(root, moved_root)
    again = rk("score", "-m", moved_root / "ens", "-i", pairs_file, "-o", tmp_path / "again.jsonl")
    assert again.exit_code == 0, again.output
    assert (tmp_path / "again.jsonl").read_text() == (tmp_path / "first.jsonl").read_text()
    alone = tmp_path / "alone"
    tiny_reward_model(alone / "a", 9)
    tiny_reward_model(alone / "b", 2)
    shutil.copytree(ens, alone / "ens")
    cwd = os.getcwd()
    try:
        os.chdir(root / "a")  # where ../a, read against the working directory, would be the original member
        one_line_error(
            rk("score", "-m", alone / "ens", "-i", pairs_file, "-o", tmp_path / "x.jsonl"), "../a", "changed"
        )
    finally:
        os.chdir(cwd)

    # A member retrained in place (its head scaled): refused, not scored on a stale scale.
    from safetensors.torch import load_file, save_file

    heads = a / "heads.safetensors"
    tensors = {k: v * 100 for k, v in load_file(str(heads)).items()}
    save_file(tensors, str(heads))
    one_line_error(
        rk("score", "-m", ens, "-i", pairs_file, "-o", tmp_path / "s.jsonl"), "member ../a changed", "ensemble"
    )


# ------------------------------------------------------------------------------------------------ reruns


def test_a_training_file_edited_in_place_is_not_reported_as_the_finished_run(tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in PAIRS * 3))
    args = ["train", "--train", "file", "--path", data, "--backbone", "tiny-bert", "--max-steps", "2", "--quiet"]
    out = tmp_path / "run"
    assert rk(*args, "--out", out).exit_code == 0
    assert "already holds this finished run" in rk(*args, "--out", out).output
    swapped = [{**r, "chosen": r["rejected"], "rejected": r["chosen"]} for r in PAIRS * 3]
    data.write_text("".join(json.dumps(r) + "\n" for r in swapped))
    one_line_error(rk(*args, "--out", out), "other inputs", "pairs.jsonl", "changed since")
    # eval of a model retrained in place: the same.
    model = out / "model"
    ev = ["eval", "--model", model, "--dataset", "file", "--path", data, "--out", tmp_path / "ev"]
    assert rk(*ev).exit_code == 0
    heads = model / "heads.safetensors"
    from safetensors.torch import load_file, save_file

    save_file({k: v + 1 for k, v in load_file(str(heads)).items()}, str(heads))
    one_line_error(rk(*ev), "other inputs", "model")


def test_train_members_refuses_a_folder_holding_someone_elses_files(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("not rewardsmith's")
    args = ["train", "--train", "synthetic/source", "--backbone", "tiny-bert", "--max-steps", "1"]
    args += ["--train-pairs", "16", "--eval-pairs", "8", "--members", "2", "--quiet", "--out", out]
    one_line_error(rk(*args), "not empty", "holds no rewardsmith run")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


# ------------------------------------------------------------------------------------------------ run folders


def test_a_link_inside_a_run_folder_is_never_written_or_read_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    with RunFolder.open(tmp_path / "run", "test", {"a": 1}) as folder:
        folder.write_json("metrics.json", {"x": 1})
        folder.claim("log.jsonl")
        with folder.open_append("log.jsonl") as fh:
            fh.write("one\n")
    for name, kind in (("metrics.json", "file"), ("log.jsonl", "file"), ("plots", "folder")):
        target = tmp_path / "run" / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        target.symlink_to(outside / name, target_is_directory=kind == "folder")
    with RunFolder.open(tmp_path / "run", "test", {"a": 1}) as folder:
        for name in ("metrics.json", "log.jsonl"):
            with pytest.raises(RunFolderError, match="symbolic link"):
                folder.write_json(name, {"x": 2})
        with pytest.raises(RunFolderError, match="symbolic link"):
            folder.read_text("metrics.json")
        with pytest.raises(RunFolderError, match="symbolic link"):
            folder.open_append("log.jsonl")
        with pytest.raises(RunFolderError, match="symbolic link"):
            folder.claim("plots/figure.png")
    assert list(outside.iterdir()) == []


def test_input_digests_follow_content_not_names(tmp_path: Path) -> None:
    from rewardsmith.io.runfolder import input_digests

    data = tmp_path / "data.jsonl"
    data.write_text("a\n")
    model = tiny_reward_model(tmp_path / "m", 1)
    first = input_digests({"data": {"path": str(data)}, "models": [str(model), "hub/id"], "seed": 1})
    assert set(first) == {"data.path", "models[0]"}
    copy = tmp_path / "copy.jsonl"
    shutil.copy(data, copy)
    assert input_digests({"data": {"path": str(copy)}})["data.path"] == first["data.path"]
    data.write_text("b\n")
    assert input_digests({"data": {"path": str(data)}})["data.path"] != first["data.path"]
    assert input_digests({"data": {"path": str(data)}}, skip=["data.path"]) == {}


def test_non_finite_values_are_named() -> None:
    from rewardsmith.errors import NonFiniteReward
    from rewardsmith.stats import require_finite

    assert require_finite([1.0, 2.0]).tolist() == [1.0, 2.0]
    with pytest.raises(NonFiniteReward, match="text 2") as info:
        require_finite(np.array([0.0, 1.0, np.inf, np.nan]))
    assert info.value.position == 2
    with pytest.raises(ConfigError, match="lambda"):
        from rewardsmith.models.ensemble import check_rule

        check_rule("uwo", 1e308)


@pytest.mark.parametrize("kind", ["train", "eval", "label"])
def test_every_run_folder_kind_refuses_links_planted_in_place_of_its_files(
    kind: str, tmp_path: Path, pairs_file: Path
) -> None:
    model = tiny_reward_model(tmp_path / "m", 0)
    args = {
        "train": ["train", "--train", "file", "--path", pairs_file, "--backbone", "tiny-bert", "--max-steps", "1"],
        "eval": ["eval", "--model", model, "--dataset", "file", "--path", pairs_file],
        "label": ["label", "--gold", model, "--input", pairs_file],
    }[kind]
    out, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    assert rk(*args, "--quiet", "--out", out).exit_code == 0
    written = [p for p in out.rglob("*") if p.is_file() and p.name != ".rewardsmith.lock"]
    assert written
    for path in written:  # every file the command wrote becomes a dangling link to a file outside the run
        path.unlink()
        path.symlink_to(outside / path.name)
    one_line_error(rk(*args, "--quiet", "--out", out, "--overwrite"), "symbolic link")
    assert list(outside.iterdir()) == []
    assert [p.name for p in written if not p.is_symlink()] == []  # not the tool's: left where they are
