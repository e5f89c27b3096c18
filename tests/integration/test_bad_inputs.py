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

from helpers import ENV, QUICK_CALIBRATE, TINY, one_line_error, rk
from rewardsmith.cli import app


def snapshot(root: Path, skip: Path | None = None) -> dict[str, str]:
    """sha256 of every file under root (except under `skip`, the run folder a command may write)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not (skip is not None and skip in path.parents):
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


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
    return (
        ["train", "--train", "synthetic/source", "--train-pairs", "-5", "--out", w / "r"],
        ["train_pairs", "-5"],
        w / "r",
    )


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
    return (
        ["train", "--train", "file", "--path", data, *TINY, "--out", w / "r"],
        ["pairs.jsonl", "row 6", "'rejected'"],
        w / "r",
    )


@case("eval: model folder missing")
def _c21(w, m, i):
    return (
        ["eval", "--model", w / "nomodel", "--dataset", "synthetic/target-clean", "--out", w / "e"],
        ["nomodel", "not found"],
        w / "e",
    )


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
            return (
                ["eval", "--model", model, "--dataset", "synthetic/target-clean", "--out", w / "e"],
                ["model"],
                w / "e",
            )

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
    return (
        ["score", "--model", m / "model", "--input", inp, "--output", w / "o", "--calibration", maps],
        ["go together"],
        None,
    )


@case("score: demonstrations for a scalar model")
def _c26(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    demos = jsonl(w / "demos.jsonl", GOOD_ROWS[:2])
    return (
        ["score", "--model", m / "model", "--input", inp, "--output", w / "o", "--demos", demos],
        ["takes no --demos"],
        None,
    )


@case("score: calibration file garbage")
def _c27(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    maps = write(w / "maps.json", "{not json")
    return (
        ["score", "--model", m / "model", "--input", inp, "--output", w / "o", "--calibration", maps, "--rater", "a"],
        ["maps.json"],
        None,
    )


@case("score: ICRM demonstrations malformed")
def _c28(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    demos = jsonl(w / "demos.jsonl", [{"prompt": "q", "chosen": "a"}])
    return (
        ["score", "--model", i, "--input", inp, "--output", w / "o", "--demos", demos],
        ["demos.jsonl", "rejected"],
        None,
    )


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
    return (
        ["icrm", "eval", "--protocol", "calibration", "--model", m / "model", "--out", w / "e"],
        ["scalar reward model"],
        w / "e",
    )


@case("eval: an ICRM model")
def _c38(w, m, i):
    return (["eval", "--model", i, "--dataset", "synthetic/target-clean", "--out", w / "e"], ["icrm eval"], w / "e")


@case("an unknown option")
def _c39(w, m, i):
    return ["train", "--trian", "synthetic/source", "--out", w / "r"], ["No such option"], w / "r"


# ---------------------------------------------------------------------------------------------------------
# The second trust pass: files the tool must not replace, pickles it must not open, degenerate data, options.

RATINGS_HEADER = "rater_id,item_id,score,model_score\n"


def _ratings(w: Path, name: str, rows: list[str]) -> Path:
    return write(w / name, RATINGS_HEADER + "".join(r + "\n" for r in rows))


def _varied_ratings(w: Path) -> Path:
    return _ratings(w, "r.csv", [f"{r},{k},{(k * 7 + ord(r)) % 10},{k / 10}" for r in "abcdefgh" for k in range(12)])


class _WritesMarker:
    """Unpickling this object opens (creates) a marker file: a test that sees the marker knows a pickle was
    loaded."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _pickle_only_backbone(w: Path, m: Path) -> Path:
    import pickle

    folder = w / "their-backbone"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(m / "model" / name, folder / name)
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_WritesMarker(w / "UNPICKLED")))
    return folder


@case("train: backbone folder with pickle weights only")
def _c40(w, m, i):
    folder = _pickle_only_backbone(w, m)
    return (
        ["train", "--train", "synthetic/source", *TINY[2:], "--backbone", folder, "--out", w / "r"],
        ["pickle", "safetensors", "save_pretrained"],
        w / "r",
    )


@case("score: model folder with pickle weights only (marker)")
def _c41(w, m, i):
    import pickle

    model = _broken_model(w, m, "pickle-weights")
    (model / "pytorch_model.bin").write_bytes(pickle.dumps(_WritesMarker(w / "UNPICKLED")))
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return ["score", "--model", model, "--input", inp, "--out", w / "o.jsonl"], ["pickle", "safetensors"], None


@case("score: --out is the model's own weights")
def _c42(w, m, i):
    model = w / "model"
    shutil.copytree(m / "model", model)
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return (
        ["score", "--model", model, "--input", inp, "--out", model / "model.safetensors"],
        ["model.safetensors", "is part of a rewardsmith model folder"],
        None,
    )


@case("score: --out is a run manifest")
def _c43(w, m, i):
    run = w / "run"
    shutil.copytree(m, run)
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return (
        ["score", "--model", run / "model", "--input", inp, "--out", run / "manifest.json"],
        ["manifest.json", "is part of the `train` run folder"],
        None,
    )


@case("score: --out written by an earlier score, no --overwrite")
def _c44(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    first = rk("score", "--model", m / "model", "--input", inp, "--out", w / "o.jsonl", "-q")
    assert first.exit_code == 0, first.output
    return (["score", "--model", m / "model", "--input", inp, "--out", w / "o.jsonl"], ["o.jsonl", "--overwrite"], None)


@case("score: --out edited since rewardsmith wrote it, with --overwrite")
def _c45(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    first = rk("score", "--model", m / "model", "--input", inp, "--out", w / "o.jsonl", "-q")
    assert first.exit_code == 0, first.output
    with open(w / "o.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"my": "own row"}\n')
    return (
        ["score", "--model", m / "model", "--input", inp, "--out", w / "o.jsonl", "--overwrite"],
        ["o.jsonl", "changed since rewardsmith wrote it"],
        None,
    )


@case("score: --out is a folder")
def _c46(w, m, i):
    (w / "somewhere").mkdir()
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return ["score", "--model", m / "model", "--input", inp, "--out", w / "somewhere"], ["is a folder"], None


@case("calibrate fit: --out is a run manifest")
def _c47(w, m, i):
    run = w / "run"
    shutil.copytree(m, run)
    return (
        ["calibrate", "fit", "--ratings", _varied_ratings(w), "--out", run / "manifest.json"],
        ["manifest.json", "is part of the `train` run folder"],
        None,
    )


@case("calibrate fit: --out written before, no --overwrite")
def _c48(w, m, i):
    ratings = _varied_ratings(w)
    first = rk("calibrate", "fit", "--ratings", ratings, "--out", w / "maps.json")
    assert first.exit_code == 0, first.output
    return ["calibrate", "fit", "--ratings", ratings, "--out", w / "maps.json"], ["maps.json", "--overwrite"], None


@case("train: --max-length beyond the backbone's positions")
def _c49(w, m, i):
    return (
        ["train", "--train", "synthetic/source", *TINY, "--max-length", "1024", "--out", w / "r"],
        ["1024", "512"],
        w / "r",
    )


@case("train: --seed 2^64+1")
def _c50(w, m, i):
    return (
        ["train", "--train", "synthetic/source", *TINY, "--seed", str(2**64 + 1), "--out", w / "r"],
        ["train.seed", "4294967295"],
        w / "r",
    )


@case("shift: --seeds 2^40")
def _c51(w, m, i):
    cfg = write(w / "s.yaml", "name: x\n")
    return ["shift", "--config", cfg, "--out", w / "s", "--seeds", str(2**40)], ["--seeds", "4294967295"], w / "s"


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@case("train: deeply nested JSON row")
def _c52(w, m, i):
    rows = "".join(json.dumps(r) + "\n" for r in GOOD_ROWS[:3])
    data = write(w / "pairs.jsonl", rows + '{"prompt": ' + _nested(100_000) + "}\n")
    return (
        ["train", "--train", "file", "--path", data, *TINY, "--out", w / "r"],
        ["pairs.jsonl", "row 4", "nested too deeply"],
        w / "r",
    )


@case("score: deeply nested JSON row")
def _c53(w, m, i):
    inp = write(w / "in.jsonl", '{"prompt": "q", "response": ' + _nested(100_000) + "}\n")
    return ["score", "--model", m / "model", "--input", inp, "--out", w / "o.jsonl"], ["in.jsonl", "row 1"], None


@case("train: deeply nested JSON array file")
def _c54(w, m, i):
    data = write(w / "pairs.json", _nested(100_000))
    return (
        ["train", "--train", "file", "--path", data, *TINY, "--out", w / "r"],
        ["pairs.json", "nested too deeply"],
        w / "r",
    )


@case("score: config.json hidden_size does not match the weights")
def _c55(w, m, i):
    model = w / "model"
    shutil.copytree(m / "model", model)
    config = json.loads((model / "config.json").read_text())
    config["hidden_size"] = 64
    write(model / "config.json", json.dumps(config))
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return ["score", "--model", model, "--input", inp, "--out", w / "o.jsonl"], [str(model)], None


@case("score: heads of the wrong shape")
def _c56(w, m, i):
    import torch
    from safetensors.torch import save_file

    model = w / "model"
    shutil.copytree(m / "model", model)
    save_file({"head.weight": torch.zeros(1, 7)}, str(model / "heads.safetensors"))
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return ["score", "--model", model, "--input", inp, "--out", w / "o.jsonl"], ["heads"], None


@case("score: a named backbone that is not here (no hub)")
def _c57(w, m, i):
    model = w / "model"
    shutil.copytree(m / "model", model)
    meta = json.loads((model / "rewardsmith.json").read_text())
    meta["backbone_storage"] = "named"
    meta["model_config"]["backbone"] = "someone/not-on-this-machine"
    write(model / "rewardsmith.json", json.dumps(meta))
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return (
        ["score", "--model", model, "--input", inp, "--out", w / "o.jsonl"],
        ["someone/not-on-this-machine", "hub is not asked"],
        None,
    )


@case("calibrate: every score identical")
def _c58(w, m, i):
    ratings = _ratings(w, "same.csv", [f"{r},{k},5,{k / 10}" for r in "abcdefgh" for k in range(12)])
    return (
        ["calibrate", "--ratings", ratings, "--out", w / "c", "--seeds", "1", "--bootstrap", "20"],
        ["same score", "nothing to"],
        w / "c",
    )


@case("calibrate: one rating per rater")
def _c59(w, m, i):
    ratings = _ratings(w, "one.csv", [f"r{k},{k},{k % 7},{k / 10}" for k in range(16)])
    return (
        ["calibrate", "--ratings", ratings, "--out", w / "c", "--seeds", "1", "--bootstrap", "20"],
        ["single rating"],
        w / "c",
    )


@case("calibrate: score column of text")
def _c60(w, m, i):
    ratings = _ratings(w, "text.csv", [f"{r},{k},x{k},{k / 10}" for r in "abcdefgh" for k in range(12)])
    return (
        ["calibrate", "--ratings", ratings, "--out", w / "c", "--seeds", "1", "--bootstrap", "20"],
        ["96 rows read", "nonfinite score 96", "must hold numbers"],
        w / "c",
    )


@case("calibrate: header only")
def _c61(w, m, i):
    ratings = _ratings(w, "empty.csv", [])
    return (
        ["calibrate", "--ratings", ratings, "--out", w / "c", "--seeds", "1", "--bootstrap", "20"],
        ["no rows", "header only"],
        w / "c",
    )


@case("calibrate: --score-min above --score-max")
def _c62(w, m, i):
    return (
        ["calibrate", "--ratings", _varied_ratings(w), "--out", w / "c", "--score-min", "10", "--score-max", "0"],
        ["score_min", "score_max"],
        w / "c",
    )


@case("calibrate: --bootstrap 0")
def _c63(w, m, i):
    return ["calibrate", "--ratings", _varied_ratings(w), "--out", w / "c", "--bootstrap", "0"], ["bootstrap"], w / "c"


@case("calibrate: --methods ''")
def _c64(w, m, i):
    return ["calibrate", "--ratings", _varied_ratings(w), "--out", w / "c", "--methods", ""], ["--methods"], w / "c"


@case("shift: --seeds ''")
def _c65(w, m, i):
    cfg = write(w / "s.yaml", "name: x\n")
    return ["shift", "--config", cfg, "--out", w / "s", "--seeds", ""], ["--seeds", "empty"], w / "s"


@case("eval: --batch-size 0")
def _c66(w, m, i):
    return (
        ["eval", "--model", m / "model", "--dataset", "synthetic/target-clean", "--batch-size", "0", "--out", w / "e"],
        ["--batch-size"],
        w / "e",
    )


@case("score: --batch-size 0")
def _c67(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return (
        ["score", "--model", m / "model", "--input", inp, "--out", w / "o.jsonl", "--batch-size", "0"],
        ["--batch-size"],
        None,
    )


@case("train: every row identical")
def _c68(w, m, i):
    data = jsonl(w / "same.jsonl", [{"prompt": f"q{k}", "chosen": "same", "rejected": "same"} for k in range(40)])
    return (
        ["train", "--train", "file", "--path", data, *TINY, "--out", w / "r"],
        ["40 rows read", "0 pairs kept", "identical 40"],
        w / "r",
    )


@case("eval: no usable pairs")
def _c69(w, m, i):
    data = jsonl(w / "same.jsonl", [{"prompt": f"q{k}", "chosen": "same", "rejected": "same"} for k in range(40)])
    return (
        ["eval", "--model", m / "model", "--dataset", "file", "--path", data, "--out", w / "e"],
        ["no pairs to evaluate", "identical 40"],
        w / "e",
    )


@case("score: input of an unsupported type")
def _c70(w, m, i):
    inp = write(w / "in.txt", "just some text\n")
    return (
        ["score", "--model", m / "model", "--input", inp, "--out", w / "o.jsonl"],
        ["in.txt", "unsupported file type"],
        None,
    )


@case("score: Parquet input that is not Parquet")
def _c71(w, m, i):
    inp = write(w / "in.parquet", "not parquet at all\n")
    return (["score", "--model", m / "model", "--input", inp, "--out", w / "o.jsonl"], ["in.parquet", "Parquet"], None)


@case("train: --set without '='")
def _c72(w, m, i):
    return (
        ["train", "--train", "synthetic/source", *TINY, "--set", "train.grad_accum", "--out", w / "r"],
        ["KEY=VALUE"],
        w / "r",
    )


@case("train: --set unknown key")
def _c73(w, m, i):
    return (
        ["train", "--train", "synthetic/source", *TINY, "--set", "train.gradient_accumulation=4", "--out", w / "r"],
        ["train.gradient_accumulation", "grad_accum"],
        w / "r",
    )


@case("train: --set value of the wrong type")
def _c74(w, m, i):
    return (
        ["train", "--train", "synthetic/source", *TINY, "--set", "train.grad_accum=lots", "--out", w / "r"],
        ["train.grad_accum", "integer"],
        w / "r",
    )


@case("train: --report-to unknown tracker")
def _c75(w, m, i):
    return (
        ["train", "--train", "synthetic/source", *TINY, "--report-to", "comet", "--out", w / "r"],
        ["report_to", "tensorboard"],
        w / "r",
    )


@case("train: --lora-r -1")
def _c76(w, m, i):
    return ["train", "--train", "synthetic/source", *TINY, "--lora-r", "-1", "--out", w / "r"], ["lora.r"], w / "r"


@case("train: --batch-size 0")
def _c77(w, m, i):
    return (
        ["train", "--train", "synthetic/source", *TINY, "--batch-size", "0", "--out", w / "r"],
        ["batch_size"],
        w / "r",
    )


@case("examples: --out holds someone else's files")
def _c78(w, m, i):
    write(w / "ex" / "pairs.jsonl", "my own pairs\n")
    return ["examples", "--out", w / "ex"], ["not empty"], None


@case("examples: --overwrite beside someone else's file of the same name")
def _c79(w, m, i):
    write(w / "ex" / "pairs.jsonl", "my own pairs\n")
    return ["examples", "--out", w / "ex", "--overwrite"], ["pairs.jsonl", "not written by rewardsmith"], w / "ex"


@case("calibrate fit: --out is a folder")
def _c80(w, m, i):
    (w / "maps.json").mkdir()
    return ["calibrate", "fit", "--ratings", _varied_ratings(w), "--out", w / "maps.json"], ["is a folder"], None


@case("train: hub backbone while offline")
def _c81(w, m, i):
    return (
        ["train", "--train", "synthetic/source", *TINY[2:], "--backbone", "someone/not-a-model", "--out", w / "r"],
        ["someone/not-a-model"],
        w / "r",
    )


@case("score: --rater without --calibration")
def _c82(w, m, i):
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return (
        ["score", "--model", m / "model", "--input", inp, "--out", w / "o.jsonl", "--rater", "a"],
        ["go together"],
        None,
    )


# ---------------------------------------------------------------------------------------------------------
# The third pass: inputs that ended in a traceback, a wrong result or silence.


def _chat_template_model(w: Path, m: Path, template: str) -> Path:
    """The trained model with a chat template of its own (a jinja text), read through it."""
    model = w / "model"
    shutil.copytree(m / "model", model)
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["chat_template"] = template
    write(model / "tokenizer_config.json", json.dumps(config))
    meta = json.loads((model / "rewardsmith.json").read_text())
    meta["template"] = "chat"
    write(model / "rewardsmith.json", json.dumps(meta))
    return model


@case("score: a chat template that raises for any conversation")
def _c83(w, m, i):
    model = _chat_template_model(w, m, "{{ raise_exception('this template renders nothing') }}")
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return (
        ["score", "--model", model, "--input", inp, "--out", w / "o.jsonl"],
        [str(model), "chat template", "this template renders nothing"],
        None,
    )


@case("score: a chat template that refuses the system role")
def _c84(w, m, i):
    template = (
        "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
        "{% endif %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>{% endfor %}"
    )
    model = _chat_template_model(w, m, template)
    system = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    inp = jsonl(w / "in.jsonl", [{"prompt": "q", "response": "a"}, {"prompt": system, "response": "hello"}])
    return (
        ["score", "--model", model, "--input", inp, "--out", w / "o.jsonl"],
        [str(model), "system, user, assistant", "System role not supported"],
        None,
    )


def _constant_model_score(w: Path) -> Path:
    return _ratings(w, "flat.csv", [f"{r},{k},{(k * 7 + ord(r)) % 10},0.5" for r in "abcdefgh" for k in range(12)])


@case("calibrate: every model score identical")
def _c85(w, m, i):
    ratings = _constant_model_score(w)
    return (
        ["calibrate", "--ratings", ratings, "--out", w / "c", "--seeds", "1", "--bootstrap", "20"],
        ["flat.csv", "same model score (0.5)", "no information to fit a slope"],
        w / "c",
    )


@case("calibrate fit: every model score identical")
def _c86(w, m, i):
    ratings = _constant_model_score(w)
    return (
        ["calibrate", "fit", "--ratings", ratings, "--out", w / "maps.json"],
        ["flat.csv", "same model score (0.5)"],
        None,
    )


@case("calibrate fit --engine duckdb: every model score identical")
def _c87(w, m, i):
    import pandas as pd

    pd.read_csv(_constant_model_score(w)).to_parquet(w / "flat.parquet")
    return (
        ["calibrate", "fit", "--engine", "duckdb", "--ratings", w / "flat.parquet", "--out", w / "maps.json"],
        ["flat.parquet", "same model score (0.5)"],
        None,
    )


def _maps_with(w: Path, edit: Callable[[dict], None]) -> Path:
    """Maps fitted by `calibrate fit`, then edited as JSON (Python's json writes a NaN as the literal NaN)."""
    fitted = rk("calibrate", "fit", "--ratings", _varied_ratings(w), "--out", w / "fitted.json")
    assert fitted.exit_code == 0, fitted.output
    maps = json.loads((w / "fitted.json").read_text())
    edit(maps)
    return write(w / "maps.json", json.dumps(maps))


@case("score: calibration map with a NaN population slope")
def _c88(w, m, i):
    maps = _maps_with(w, lambda d: d["population"].update(slope=float("nan")))
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return (
        ["score", "--model", m / "model", "--input", inp, "--out", w / "o", "--calibration", maps, "--rater", "z"],
        ["maps.json", "population.slope", "nan"],
        None,
    )


@case("score: calibration map with a null rater intercept")
def _c89(w, m, i):
    maps = _maps_with(w, lambda d: d["raters"]["intercept"].__setitem__(1, None))
    inp = jsonl(w / "in.jsonl", GOOD_ROWS[:2])
    return (
        ["score", "--model", m / "model", "--input", inp, "--out", w / "o", "--calibration", maps, "--rater", "a"],
        ["maps.json", "raters.intercept", "rater 'b'"],
        None,
    )


@case("shift: --threads 100000")
def _c90(w, m, i):
    cfg = write(w / "s.yaml", "name: x\n")
    return (
        ["shift", "--config", cfg, "--out", w / "s", "--threads", "100000"],
        ["threads", "at most", "100000"],
        w / "s",
    )


@case("shift: --threads 0")
def _c91(w, m, i):
    cfg = write(w / "s.yaml", "name: x\n")
    return ["shift", "--config", cfg, "--out", w / "s", "--threads", "0"], ["threads", "at least 1"], w / "s"


@case("train: an empty config file")
def _c92(w, m, i):
    cfg = write(w / "empty.yaml", "")
    return ["train", "--config", cfg, "--out", w / "r"], ["empty.yaml", "data.train.name", "--train"], w / "r"


@case("train: a config that names no training set")
def _c93(w, m, i):
    cfg = write(w / "c.yaml", "train: {lr: 0.001}\ndata: {train_pairs: 32}\n")
    return ["train", "--config", cfg, "--out", w / "r"], ["c.yaml", "data.train.name", "--train"], w / "r"


@case("calibrate fit --engine duckdb: a CSV beside the Parquet parts")
def _c94(w, m, i):
    import pandas as pd

    frame = pd.read_csv(_varied_ratings(w))
    (w / "ratings").mkdir()
    frame.iloc[:48].to_parquet(w / "ratings" / "part-0.parquet")
    frame.iloc[48:].to_csv(w / "ratings" / "part-1.csv", index=False)
    return (
        ["calibrate", "fit", "--engine", "duckdb", "--ratings", w / "ratings", "--out", w / "maps.json"],
        ["part-1.csv", "not a Parquet file"],
        None,
    )


def _bon_prompts(w: Path) -> Path:
    return jsonl(w / "bon.jsonl", [{"prompt": "hi", "instructions": [{"id": "punctuation:no_comma"}]}])


def _bon(w: Path, m: Path, *args: str | Path) -> list[str | Path]:
    return ["bon", *args, "--out", w / "bon", "--quiet"]


@case("bon: a policy folder without weights")
def _c_bon1(w, m, i):
    policy = w / "policy"
    write(policy / "config.json", json.dumps({"model_type": "llama"}))
    args = _bon(w, m, "--policy", policy, "--prompts", _bon_prompts(w), "--proxy", m / "model", "--gold", "ifeval")
    return args, ["policy", "no weights"], w / "bon"


@case("bon: a proxy that is also the gold")
def _c_bon2(w, m, i):
    args = _bon(
        w, m, "--policy", "smollm2", "--prompts", _bon_prompts(w), "--proxy", m / "model", "--gold", m / "model"
    )
    return args, ["same weights", "its own gold"], None


@case("bon: --n 1")
def _c_bon3(w, m, i):
    args = _bon(w, m, "--policy", "smollm2", "--prompts", _bon_prompts(w), "--proxy", m / "model", "--gold", "ifeval")
    return [*args, "--n", "1"], ["'n'", "at least 2"], None


@case("bon: an empty prompt set")
def _c_bon4(w, m, i):
    empty = write(w / "empty.jsonl", "")
    args = _bon(w, m, "--policy", "smollm2", "--prompts", empty, "--proxy", m / "model", "--gold", "ifeval")
    return args, ["no prompts"], w / "bon"


@case("bon: --samples of the wrong shape")
def _c_bon5(w, m, i):
    samples = jsonl(w / "samples.jsonl", [{"prompt": "hi", "responses": "one text"}])
    args = _bon(w, m, "--samples", samples, "--proxy", m / "model", "--gold", "ifeval", "--n", "2")
    return args, ["samples.jsonl", "row 1", "responses"], w / "bon"


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    name: str, tmp_path: Path, trained: Path, icrm_model: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    # A sentinel folder beside the run: its bytes (checksums) must survive every case.
    write(work / "sentinel" / "notes.txt", "someone's notes\n")
    (work / "sentinel" / "deep").mkdir()
    (work / "sentinel" / "deep" / "weights.bin").write_bytes(bytes(range(256)) * 8)
    args, needles, run_folder = CASES[name](work, trained, icrm_model)
    before = snapshot(work, skip=run_folder)
    result = rk(*args)
    one_line_error(result, *needles)
    assert snapshot(work, skip=run_folder) == before


def test_there_are_at_least_80_cases() -> None:
    assert len(CASES) >= 80


@pytest.mark.parametrize("command", ["train", "calibrate", "score"])
def test_read_only_output_is_one_line(command: str, tmp_path: Path, trained: Path) -> None:
    locked = tmp_path / "locked"
    ratings = write(
        tmp_path / "r.csv",
        "rater_id,item_id,score,model_score\n"
        + "".join(f"{r},{k},{(k * 7 + ord(r)) % 10},{k / 10}\n" for r in "abcdefgh" for k in range(12)),
    )
    inp = jsonl(tmp_path / "in.jsonl", GOOD_ROWS[:2])
    args = {
        "train": ["train", "--train", "synthetic/source", *TINY, "--out", locked / "run"],
        "calibrate": [
            "calibrate",
            "--ratings",
            ratings,
            "--out",
            locked / "run",
            *QUICK_CALIBRATE,
        ],
        "score": ["score", "--model", trained / "model", "--input", inp, "--output", locked / "o.jsonl"],
    }[command]
    with read_only(locked):
        result = rk(*args)
    one_line_error(result, str(locked))
    assert list(locked.iterdir()) == []


def test_a_foreign_folder_survives_overwrite_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "theirs"
    write(out / "model" / "important.bin", "precious weights")
    write(out / "notes.txt", "my notes")
    before = snapshot(out)
    refused = rk("train", "--train", "synthetic/source", *TINY, "--out", out)
    one_line_error(refused, "not empty")
    assert snapshot(out) == before
    # --overwrite writes beside their files, but a path they own is never replaced: refused, nothing lost.
    clash = rk("train", "--train", "synthetic/source", *TINY, "--out", out, "--overwrite")
    one_line_error(clash, "model", "not written by rewardsmith")
    after = snapshot(out)
    assert {k: v for k, v in after.items() if k in before} == before


def test_rerun_with_another_seed_is_refused_and_the_finished_model_kept(tmp_path: Path, trained: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    before = snapshot(run)
    result = rk("train", "--train", "synthetic/source", *TINY, "--out", run, "--seed", "3")
    one_line_error(result, "train.seed: 0 -> 3")
    assert snapshot(run) == before


@pytest.mark.slow  # whole commands in fresh processes, killed and run again
@pytest.mark.parametrize(("step", "earlier"), [("recorded", True), ("replaced", True), ("replaced", False)])
def test_a_kill_between_an_output_and_its_record_leaves_a_file_the_rerun_may_replace(
    step: str, earlier: bool, tmp_path: Path
) -> None:
    """A real SIGKILL after the record names the new bytes (old output still in place) or after the new output is
    renamed into place (its record not yet final): the file left is recognised as rewardsmith's, so a rerun asks for
    --overwrite and then replaces it; a file nobody recorded stays refused."""
    import sys

    from rewardsmith.io.outputs import KILL_AT_ENV, written_by_tool

    ratings = _varied_ratings(tmp_path)
    out = tmp_path / "maps.json"
    args = [sys.executable, "-m", "rewardsmith.cli", "calibrate", "fit", "--ratings", str(ratings), "--out", str(out)]
    env = {**os.environ, **ENV}
    if earlier:
        first = subprocess.run(args, env=env, capture_output=True, text=True)
        assert first.returncode == 0, first.stderr
    before = out.read_bytes() if earlier else None
    rerun = [*args, "--overwrite"] if earlier else args
    killed = subprocess.run(rerun, env={**env, KILL_AT_ENV: step}, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    if step == "recorded":
        assert (out.read_bytes() if out.exists() else None) == before
    else:
        assert out.is_file() and json.loads(out.read_text())["format"] == "rewardsmith.calibration/1"
    if out.exists():
        assert written_by_tool(out)
        one_line_error(rk("calibrate", "fit", "--ratings", ratings, "--out", out), "maps.json", "--overwrite")
    again = subprocess.run([*args, "--overwrite"], env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert written_by_tool(out)
    # The record never vouches for other bytes: an edited output is someone's, even after the kill.
    out.write_text(out.read_text() + " ")
    one_line_error(rk("calibrate", "fit", "--ratings", ratings, "--out", out, "--overwrite"), "changed since")


def test_a_hub_id_while_offline_asks_no_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HF_HUB_OFFLINE set after huggingface_hub was imported (it reads it once): a hub id as --model or --backbone
    is one line at once, and no host name is even looked up."""
    import socket

    import huggingface_hub  # noqa: F401  (imported before the variable is set)

    looked_up: list[str] = []
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: looked_up.append(str(host)) or real(host, *a, **k))
    inp = jsonl(tmp_path / "in.jsonl", GOOD_ROWS[:2])
    scored = rk("score", "--model", "someone/not-a-model", "--input", inp, "--out", tmp_path / "o.jsonl")
    one_line_error(scored, "someone/not-a-model", "HF_HUB_OFFLINE")
    trained = rk("train", "--train", "synthetic/source", "--backbone", "someone/not-a-model", "--out", tmp_path / "r")
    one_line_error(trained, "someone/not-a-model", "HF_HUB_OFFLINE")
    assert looked_up == []


def test_a_hub_id_without_a_network_is_one_line_without_retry_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not offline, but the hub unreachable (a closed local port stands in for it; the back-off waits are skipped):
    huggingface_hub's line per retried request is not printed, and the error is one line."""
    import time

    from huggingface_hub import constants

    closed = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once
    monkeypatch.setattr(constants, "ENDPOINT", closed)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", closed + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    env = {**ENV, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": closed}
    result = CliRunner().invoke(
        app,
        ["train", "--train", "synthetic/source", "--backbone", "someone/not-a-model", "--out", str(tmp_path / "r")],
        env=env,
    )
    one_line_error(result, "someone/not-a-model")
    assert "Retry" not in result.stderr + result.stdout
    assert "asking the Hugging Face Hub" in result.stdout  # the wait is announced, not silent
