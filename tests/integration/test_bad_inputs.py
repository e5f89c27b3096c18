"""Everyday mistakes, as a user makes them on the command line. Each one must end with exactly one line on
stderr starting "error:", exit code 2, no traceback, and no file changed outside the run folder (every file
the test laid out beforehand keeps its bytes)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardsmith.cli import app

ENV = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
TINY = ["--backbone", "tiny-bert", "--max-steps", "2", "--train-pairs", "32", "--eval-pairs", "16", "--quiet"]


def rk(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV)


def snapshot(root: Path, skip: Path | None = None) -> dict[str, str]:
    """sha256 of every file under root (except under `skip`, the run folder a command may write)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not (skip is not None and skip in path.parents):
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def assert_one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("trained") / "run"
    result = rk("train", "--train", "synthetic/source", *TINY, "--out", run)
    assert result.exit_code == 0, result.output
    return run


@pytest.fixture(scope="module")
def icrm_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rewardsmith.config import ICRMModelConfig
    from rewardsmith.models.factory import build_model, save_model

    cfg = ICRMModelConfig(backbone="tiny-bert", max_length=32, min_prompt_tokens=8, context_dim=8, hidden_dim=8)
    model, tok = build_model(cfg)
    return save_model(model, tok, tmp_path_factory.mktemp("icrm") / "model", cfg)


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """Makes `folder` unwritable (chmod, or the immutable attribute where the tests run as root)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o555)
    immutable = False
    probe = folder / ".probe"
    try:
        probe.touch()
        probe.unlink()
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)]).returncode != 0:
            pytest.skip("cannot make a folder read-only here")
        immutable = True
    except PermissionError:
        pass
    try:
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=False)
        os.chmod(folder, 0o755)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(path: Path, rows: list[dict]) -> Path:
    return write(path, "".join(json.dumps(r) + "\n" for r in rows))


GOOD_ROWS = [{"prompt": f"question {i}", "chosen": f"a kind answer {i}", "rejected": f"no {i}"} for i in range(24)]

# name -> builds (arguments, needles, run folder or None) inside a working folder
Case = Callable[[Path, Path, Path], tuple[list[str | Path], list[str], Path | None]]
CASES: dict[str, Case] = {}


def case(name: str) -> Callable[[Case], Case]:
    def add(fn: Case) -> Case:
        CASES[name] = fn
        return fn

    return add


@case("unknown dataset")
def _c1(w, m, i):
    return ["train", "--train", "no-such-set", "--out", w / "r"], ["no-such-set", "hh-rlhf/harmless-base"], w / "r"


@case("unknown backbone")
def _c2(w, m, i):
    return ["train", "--train", "synthetic/source", "--backbone", "nope", "--out", w / "r"], ["nope"], w / "r"


@case("training file missing")
def _c3(w, m, i):
    return ["train", "--train", "file", "--path", w / "x.jsonl", "--out", w / "r"], ["x.jsonl", "not found"], w / "r"


@case("no training set")
def _c4(w, m, i):
    return ["train", "--out", w / "r"], ["--train is required"], w / "r"


@case("--epochs one")
def _c5(w, m, i):
    return ["train", "--train", "synthetic/source", "--epochs", "one", "--out", w / "r"], ["--epochs"], w / "r"


@case("--batch-size 16.5")
def _c6(w, m, i):
    return ["train", "--train", "synthetic/source", "--batch-size", "16.5", "--out", w / "r"], ["--batch-size"], w / "r"


@case("--train-pairs -5")
def _c7(w, m, i):
    return (["train", "--train", "synthetic/source", "--train-pairs", "-5", "--out", w / "r"],
            ["train_pairs", "-5"], w / "r")


@case("yaml train_pairs lots")
def _c8(w, m, i):
    cfg = write(w / "c.yaml", 'data: {train: {name: synthetic/source}, train_pairs: "lots"}\n')
    return ["train", "--config", cfg, "--out", w / "r"], ["c.yaml", "data.train_pairs", "integer", "lots"], w / "r"


@case("yaml epochs one")
def _c9(w, m, i):
    cfg = write(w / "c.yaml", "data: {train: {name: synthetic/source}}\ntrain: {epochs: one}\n")
    return ["train", "--config", cfg, "--out", w / "r"], ["train.epochs", "number", "one"], w / "r"


@case("yaml lr list")
def _c10(w, m, i):
    cfg = write(w / "c.yaml", "data: {train: {name: synthetic/source}}\ntrain: {lr: [1, 2]}\n")
    return ["train", "--config", cfg, "--out", w / "r"], ["train.lr", "[1, 2]"], w / "r"


@case("yaml batch_size 16.5")
def _c11(w, m, i):
    cfg = write(w / "c.yaml", "data: {train: {name: synthetic/source}}\ntrain: {batch_size: 16.5}\n")
    return ["train", "--config", cfg, "--out", w / "r"], ["train.batch_size", "16.5"], w / "r"


@case("yaml unknown key")
def _c12(w, m, i):
    cfg = write(w / "c.yaml", "train: {learning_rate: 0.1}\n")
    return ["train", "--config", cfg, "--out", w / "r"], ["learning_rate"], w / "r"


@case("yaml syntax")
def _c13(w, m, i):
    cfg = write(w / "c.yaml", "train: {lr: [\n")
    return ["train", "--config", cfg, "--out", w / "r"], ["c.yaml", "invalid YAML"], w / "r"


@case("yaml not a mapping")
def _c14(w, m, i):
    cfg = write(w / "c.yaml", "- a\n- b\n")
    return ["train", "--config", cfg, "--out", w / "r"], ["top level must be a mapping"], w / "r"


@case("config file missing")
def _c15(w, m, i):
    return ["train", "--config", w / "none.yaml", "--out", w / "r"], ["none.yaml", "not found"], w / "r"


@case("--out is a file")
def _c16(w, m, i):
    write(w / "r", "I am a file")
    return ["train", "--train", "synthetic/source", *TINY, "--out", w / "r"], ["not a folder"], None


@case("--out holds someone else's files")
def _c17(w, m, i):
    write(w / "r" / "model" / "important.bin", "precious")
    write(w / "r" / "report.md", "my notes")
    return ["train", "--train", "synthetic/source", *TINY, "--out", w / "r"], ["not empty"], None


@case("--out holds a stray log.jsonl")
def _c18(w, m, i):
    write(w / "r" / "log.jsonl", "not json at all\n")
    return ["train", "--train", "synthetic/source", *TINY, "--out", w / "r"], ["holds no rewardsmith run"], None


@case("--out holds a foreign checkpoint.pt")
def _c19(w, m, i):
    (w / "r").mkdir()
    (w / "r" / "checkpoint.pt").write_bytes(b"\x80\x04crafted")
    return ["train", "--train", "synthetic/source", *TINY, "--out", w / "r"], ["not empty"], None


@case("malformed training row")
def _c20(w, m, i):
    data = jsonl(w / "pairs.jsonl", [*GOOD_ROWS[:5], {"prompt": "q", "chosen": "one side only"}, *GOOD_ROWS[5:]])
    return (["train", "--train", "file", "--path", data, *TINY, "--out", w / "r"],
            ["pairs.jsonl", "row 6", "'rejected'"], w / "r")


@case("eval: model folder missing")
def _c21(w, m, i):
    return (["eval", "--model", w / "nomodel", "--dataset", "synthetic/target-clean", "--out", w / "e"],
            ["nomodel", "not found"], w / "e")


def _broken_model(w: Path, m: Path, breakage: str) -> Path:
    copy = w / "model"
    shutil.copytree(m / "model", copy)
    if breakage == "meta":
        write(copy / "rewardsmith.json", "{garbage")
    elif breakage == "heads-missing":
        (copy / "heads.safetensors").unlink()
    elif breakage == "heads-truncated":
        data = (copy / "heads.safetensors").read_bytes()
        (copy / "heads.safetensors").write_bytes(data[: len(data) // 2])
    elif breakage == "backbone-truncated":
        data = (copy / "model.safetensors").read_bytes()
        (copy / "model.safetensors").write_bytes(data[:1000])
    elif breakage == "pickle-weights":
        (copy / "model.safetensors").unlink()
        (copy / "pytorch_model.bin").write_bytes(b"\x80\x04crafted pickle")
    return copy


for _b in ("meta", "heads-missing", "heads-truncated", "backbone-truncated", "pickle-weights"):
    def _make(breakage: str) -> Case:
        def build(w, m, i):
            model = _broken_model(w, m, breakage)
            return (["eval", "--model", model, "--dataset", "synthetic/target-clean", "--out", w / "e"], ["model"],
                    w / "e")
        return build

    CASES[f"eval: model {_b}"] = _make(_b)

    def _make_score(breakage: str) -> Case:
        def build(w, m, i):
            model = _broken_model(w, m, breakage)
            inp = jsonl(w / "in.jsonl", GOOD_ROWS[:3])
            return ["score", "--model", model, "--input", inp, "--output", w / "o.jsonl"], ["model"], None
        return build

    CASES[f"score: model {_b}"] = _make_score(_b)


@case("score: input missing")
def _c22(w, m, i):
    return ["score", "--model", m / "model", "--input", w / "in.jsonl", "--output", w / "o"], ["in.jsonl"], None


@case("score: input not JSON")
def _c23(w, m, i):
    inp = write(w / "in.jsonl", '{"prompt": "q", "response": "a"}\n{oops\n')
    return ["score", "--model", m / "model", "--input", inp, "--output", w / "o"], ["in.jsonl", "row 2"], None


@case("score: output would overwrite the input")
def _c24(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return ["score", "--model", m / "model", "--input", inp, "--output", inp], ["overwrite the input"], None


@case("score: --calibration without --rater")
def _c25(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    maps = write(w / "maps.json", "{}")
    return (["score", "--model", m / "model", "--input", inp, "--output", w / "o", "--calibration", maps],
            ["go together"], None)


@case("score: demonstrations for a scalar model")
def _c26(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    demos = jsonl(w / "demos.jsonl", GOOD_ROWS[:2])
    return (["score", "--model", m / "model", "--input", inp, "--output", w / "o", "--demos", demos],
            ["takes no --demos"], None)


@case("score: calibration file garbage")
def _c27(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    maps = write(w / "maps.json", "{not json")
    return (["score", "--model", m / "model", "--input", inp, "--output", w / "o", "--calibration", maps,
             "--rater", "a"], ["maps.json"], None)


@case("score: ICRM demonstrations malformed")
def _c28(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    demos = jsonl(w / "demos.jsonl", [{"prompt": "q", "chosen": "a"}])
    return (["score", "--model", i, "--input", inp, "--output", w / "o", "--demos", demos],
            ["demos.jsonl", "rejected"], None)


@case("calibrate: no arguments")
def _c29(w, m, i):
    return ["calibrate"], ["--out is required"], None


@case("calibrate: ratings path typo")
def _c30(w, m, i):
    return ["calibrate", "--ratings", w / "ratinsg.csv", "--out", w / "c"], ["ratinsg.csv", "not found"], w / "c"


@case("calibrate: unknown ratings source")
def _c31(w, m, i):
    return ["calibrate", "--ratings", "nosuchsource", "--out", w / "c"], ["nosuchsource", "pluriharms"], w / "c"


@case("calibrate: --holdout 2")
def _c32(w, m, i):
    ratings = write(w / "r.csv", "rater_id,item_id,score,model_score\na,1,1,0.5\n")
    return ["calibrate", "--ratings", ratings, "--out", w / "c", "--holdout", "2"], ["holdout"], w / "c"


@case("calibrate fit: output suffix")
def _c33(w, m, i):
    ratings = write(w / "r.csv", "rater_id,item_id,score,model_score\na,1,1,0.5\n")
    return ["calibrate", "fit", "--ratings", ratings, "--out", w / "maps.txt"], [".json or .parquet"], None


@case("shift: unknown objective")
def _c34(w, m, i):
    cfg = write(w / "s.yaml", "methods: [{name: x, objective: nope}]\n")
    return ["shift", "--config", cfg, "--out", w / "s"], ["nope"], w / "s"


@case("shift: --seeds not integers")
def _c35(w, m, i):
    cfg = write(w / "s.yaml", "name: x\n")
    return ["shift", "--config", cfg, "--out", w / "s", "--seeds", "a,b"], ["--seeds"], w / "s"


@case("icrm eval: unknown protocol")
def _c36(w, m, i):
    return ["icrm", "eval", "--protocol", "nope", "--model", i, "--out", w / "e"], ["unknown icrm protocol"], w / "e"


@case("icrm eval: a scalar model")
def _c37(w, m, i):
    return (["icrm", "eval", "--protocol", "calibration", "--model", m / "model", "--out", w / "e"],
            ["scalar reward model"], w / "e")


@case("eval: an ICRM model")
def _c38(w, m, i):
    return (["eval", "--model", i, "--dataset", "synthetic/target-clean", "--out", w / "e"], ["icrm eval"],
            w / "e")


@case("an unknown option")
def _c39(w, m, i):
    return ["train", "--trian", "synthetic/source", "--out", w / "r"], ["No such option"], w / "r"


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_changes_nothing(name: str, tmp_path: Path, trained: Path,
                                                           icrm_model: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    args, needles, run_folder = CASES[name](work, trained, icrm_model)
    before = snapshot(work)
    result = rk(*args)
    assert_one_line_error(result, *needles)
    assert snapshot(work, skip=run_folder) == before


def test_there_are_at_least_30_cases() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize("command", ["train", "calibrate", "score"])
def test_read_only_output_is_one_line(command: str, tmp_path: Path, trained: Path) -> None:
    locked = tmp_path / "locked"
    ratings = write(tmp_path / "r.csv", "rater_id,item_id,score,model_score\n" + "".join(
        f"{r},{k},{(k * 7 + ord(r)) % 10},{k / 10}\n" for r in "abcdefgh" for k in range(12)))
    inp = jsonl(tmp_path / "in.jsonl", GOOD_ROWS[:2])
    args = {"train": ["train", "--train", "synthetic/source", *TINY, "--out", locked / "run"],
            "calibrate": ["calibrate", "--ratings", ratings, "--out", locked / "run", "--seeds", "1", "--bootstrap",
                          "20", "--fit-sizes", "", "--methods", "pooled,pebs"],
            "score": ["score", "--model", trained / "model", "--input", inp, "--output", locked / "o.jsonl"]}[command]
    with read_only(locked):
        result = rk(*args)
    assert_one_line_error(result, str(locked))
    assert list(locked.iterdir()) == []


def test_a_foreign_folder_survives_overwrite_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "theirs"
    write(out / "model" / "important.bin", "precious weights")
    write(out / "notes.txt", "my notes")
    before = snapshot(out)
    refused = rk("train", "--train", "synthetic/source", *TINY, "--out", out)
    assert_one_line_error(refused, "not empty")
    assert snapshot(out) == before
    # --overwrite writes beside their files, but a path they own is never replaced: refused, nothing lost.
    clash = rk("train", "--train", "synthetic/source", *TINY, "--out", out, "--overwrite")
    assert_one_line_error(clash, "model", "not written by rewardsmith")
    after = snapshot(out)
    assert {k: v for k, v in after.items() if k in before} == before


def test_rerun_with_another_seed_is_refused_and_the_finished_model_kept(tmp_path: Path, trained: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    before = snapshot(run)
    result = rk("train", "--train", "synthetic/source", *TINY, "--out", run, "--seed", "3")
    assert_one_line_error(result, "train.seed: 0 -> 3")
    assert snapshot(run) == before
