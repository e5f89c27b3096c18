"""The command line as a user meets it, run in-process (Typer's CliRunner): help texts with every default,
one-line errors with exit code 2, real train / eval / score runs. One subprocess smoke test runs the installed
entry point."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import ENV, TINY, one_line_error, rk
from rewardsmith.cli import app

# A tiny-bert run on 48 training pairs with 40 held out (its steps given apart).
HELD_OUT_40 = ["--backbone", "tiny-bert", "--train-pairs", "48", "--eval-pairs", "40", "--quiet"]
COMMANDS = [
    [],
    ["train"],
    ["eval"],
    ["score"],
    ["demo"],
    ["datasets"],
    ["shift"],
    ["calibrate"],
    ["calibrate", "run"],
    ["calibrate", "fit"],
    ["icrm"],
    ["icrm", "train"],
    ["icrm", "eval"],
    ["serve"],
    ["ensemble"],
]


def option_blocks(help_text: str) -> dict[str, str]:
    """Option name -> its whole help entry (continuation lines joined)."""
    blocks: dict[str, str] = {}
    current = None
    for line in help_text.split("Options:", 1)[-1].splitlines():
        stripped = line.strip()
        if stripped.startswith("-"):
            current = next(t for t in stripped.replace(",", " ").split() if t.startswith("--")).split("/")[0]
            blocks[current] = stripped
        elif current and stripped:
            blocks[current] += " " + stripped
    return blocks


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "top")
def test_help_shows_every_default(command: list[str]) -> None:
    result = rk(*command, "--help")
    assert result.exit_code == 0, result.output
    assert "Usage" in result.stdout and "<bool>" not in result.stdout
    for name, entry in option_blocks(result.stdout).items():
        flags = entry.split("  ")[0].split()
        takes_value = flags[-1].isupper() or "/" in entry.split("  ")[0]  # a metavar (TEXT, INTEGER), or --x/--y
        if takes_value and "[required" not in entry and name != "--help":
            assert "[default:" in entry, (command, name, entry)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "top")
def test_help_metavars_are_words_and_ranges_are_in_the_help(command: list[str]) -> None:
    text = rk(*command, "--help").stdout
    for entry in option_blocks(text).values():
        tokens = entry.split()
        head = []  # the flags and the metavar: every token before the help text starts
        for token in tokens:
            if not (token.startswith("-") or token.startswith("<") or token.rstrip(",.").isupper()):
                break
            head.append(token)
        flags = " ".join(head)
        assert "<" not in flags and "[" not in flags, (command, flags)  # not <int range>, <list[str]>
    blocks = option_blocks(rk("train", "--help").stdout)
    assert blocks["--members"].startswith("--members INTEGER ") and "x>=1]" in blocks["--members"]
    assert blocks["--eval"].startswith("--eval TEXT ") and "(repeatable)" in blocks["--eval"]


@pytest.mark.parametrize("command", [["train"], ["shift"], ["icrm", "train"], ["icrm", "eval"]], ids=" ".join)
def test_the_set_example_is_a_key_the_command_lists(command: list[str]) -> None:
    text = rk(*command, "--help").stdout
    found = re.search(r"e\.g\.\s+--set\s+([\w.]+)=", text)
    assert found, text
    key = found.group(1)
    listed = [line.strip().split(":", 1)[0] for line in text.split("Config keys", 1)[1].splitlines()[1:]]
    assert key in listed, (command, key)


def test_train_help_says_one_default_for_the_training_set() -> None:
    text = rk("train", "--help").stdout
    option = option_blocks(text)["--train"].split("[default: ", 1)[1].split("]")[0]
    key = next(line for line in text.splitlines() if line.strip().startswith("data.train.name:"))
    assert (
        key.split("[default: ", 1)[1].split("]")[0]
        == option
        == "none: give --train, or name the training set in --config"
    )


def test_a_list_key_takes_the_form_help_shows(tmp_path: Path) -> None:
    from rewardsmith.cli.common import _shown
    from rewardsmith.config import apply_overrides, config_keys, parse_set_options
    from rewardsmith.icrm.config import ICRMRunConfig

    # Every list-valued key's default, written as --help shows it, reads back as that default.
    for key, _, default in config_keys(ICRMRunConfig):
        if isinstance(default, list) and default and not hasattr(default[0], "__dataclass_fields__"):
            cfg = ICRMRunConfig()
            apply_overrides(cfg, parse_set_options([f"{key}={_shown(default)}"]))
            value = cfg
            for name in key.split("."):
                value = getattr(value, name)
            assert value == default, (key, _shown(default), value)
    cfg = ICRMRunConfig()
    apply_overrides(cfg, parse_set_options(["eval.n_values=0,8", "model.lora.target_modules=q_proj,v_proj"]))
    assert cfg.eval.n_values == [0, 8] and cfg.model.lora.target_modules == ["q_proj", "v_proj"]
    one_line_error(rk("icrm", "eval", "-p", "all", "-m", str(tmp_path), "--out", str(tmp_path / "o"),
                      "--set", "eval.n_values=0,eight"), "eval.n_values[1]")  # fmt: skip


def test_results_tables_are_at_most_120_characters_wide(capsys: pytest.CaptureFixture[str]) -> None:
    from rewardsmith.cli.common import TABLE_WIDTH, print_table

    row = {f"a long column name number {i}": f"{50 + i}.0 [4{i}.0, 5{i}.0] of a long cell" for i in range(9)}
    print_table([{"dataset": "hh-rlhf/harmless-base (held-out) and more words", **row}], "results")
    out = capsys.readouterr().out
    assert TABLE_WIDTH == 120 and max(len(line) for line in out.splitlines()) <= 120
    assert "58.0" in out and "results" in out  # cells wrapped, not dropped


def test_top_level_help_lists_every_command() -> None:
    out = rk("--help").stdout
    for name in ("train", "eval", "score", "demo", "datasets", "shift", "calibrate", "icrm", "serve", "ensemble"):
        assert f"  {name} " in out


def test_unknown_dataset(tmp_path: Path) -> None:
    one_line_error(
        rk("train", "--train", "no-such-set", "--out", str(tmp_path / "r")), "no-such-set", "hh-rlhf/harmless-base"
    )


def test_unknown_backbone(tmp_path: Path) -> None:
    one_line_error(
        rk("train", "--train", "synthetic/source", "--backbone", "nope", "--out", str(tmp_path / "r")), "nope"
    )


def test_missing_file(tmp_path: Path) -> None:
    one_line_error(
        rk("train", "--train", "file", "--path", str(tmp_path / "x.jsonl"), "--out", str(tmp_path / "r")), "x.jsonl"
    )


def test_train_needs_a_training_set(tmp_path: Path) -> None:
    one_line_error(rk("train", "--out", str(tmp_path / "r")), "--train is required")


def test_malformed_row_names_file_row_and_field_then_skip_counts_and_says_it(tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    good = {"prompt": "q", "chosen": "good answer", "rejected": "bad answer"}
    rows = [{**good, "prompt": f"q{i}"} for i in range(20)] + [{"prompt": "q", "chosen": "only one side"}]
    rows += [{**good, "prompt": f"r{i}"} for i in range(20)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["train", "--train", "file", "--path", str(data), "--backbone", "tiny-bert", "--max-steps", "1", "--quiet"]
    one_line_error(rk(*base, "--out", str(tmp_path / "a")), "pairs.jsonl", "21", "rejected")
    result = rk(*base, "--on-bad-row", "skip", "--out", str(tmp_path / "b"))
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert metrics["data"]["train"]["dropped"].get("malformed") == 1
    assert "read pairs.jsonl: 41 rows read, 31 used, 9 held out, 1 dropped (malformed 1)" in result.stdout


def test_bad_config_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("train:\n  learning_rate: 0.1\n")
    one_line_error(rk("train", "--config", str(cfg), "--out", str(tmp_path / "r")), "c.yaml", "learning_rate")


def test_train_score_and_eval_a_saved_model(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = rk("train", "--train", "synthetic/source", *HELD_OUT_40, "--max-steps", "3", "--out", run)
    assert result.exit_code == 0, result.output
    for name in (
        "manifest.json",
        "config.yaml",
        "metrics.json",
        "log.jsonl",
        "report.md",
        "report.html",
        "model/rewardsmith.json",
        "model/heads.safetensors",
        "plots/training_loss.png",
    ):
        assert (run / name).exists(), name
    assert "read synthetic/source" in result.stdout and "wrote" in result.stdout
    inp = tmp_path / "in.jsonl"
    inp.write_text(
        json.dumps({"prompt": "hi", "response": "hello"})
        + "\n"
        + json.dumps({"prompt": "hi", "chosen": "hello", "rejected": "go away"})
        + "\n"
    )
    result = rk("score", "--model", str(run / "model"), "--input", str(inp), "--output", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.output
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert "reward" in rows[0] and 0 <= rows[1]["p_chosen"] <= 1
    assert "model load" in result.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "hi"}\n')
    one_line_error(
        rk("score", "--model", str(run / "model"), "--input", str(bad), "--output", str(tmp_path / "o2")),
        "bad.jsonl",
        "row 1",
    )
    result = rk(
        "eval",
        "--model",
        str(run / "model"),
        "--dataset",
        "synthetic/target-clean",
        "--limit",
        "30",
        "--quiet",
        "--out",
        str(tmp_path / "ev"),
    )
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "ev" / "metrics.json").read_text())["eval"]["synthetic/target-clean"]["n"] == 30
    assert len(json.loads((tmp_path / "ev" / "scores.json").read_text())["synthetic/target-clean"]["chosen"]) == 30


def test_validation_split_and_per_pair_scores(tmp_path: Path) -> None:
    """data.val_fraction adds a validation set between training and held-out (conversations on one side only,
    the held-out part unchanged); scores.json holds every evaluated pair's rewards, which reproduce the
    reported accuracy and length correlation."""
    from rewardsmith.config import DataConfig, DatasetConfig
    from rewardsmith.data.prepare import train_data as prepare_data

    source = DatasetConfig("synthetic/source", limit=400)
    plain = prepare_data(DataConfig(train=source))
    split = prepare_data(DataConfig(train=source, train_fraction=0.6, val_fraction=0.2))
    held, val = split.eval_sets["synthetic/source (held-out)"], split.eval_sets["synthetic/source (validation)"]
    assert [p.pair_id for p in held] == [p.pair_id for p in plain.eval_sets["synthetic/source (held-out)"]]
    keys = [{p.group_key() for p in part} for part in (split.train, val, held)]
    assert val and not (keys[0] & keys[1]) and not (keys[1] & keys[2]) and not (keys[0] & keys[2])
    one_line_error(
        rk(
            "train",
            "--train",
            "synthetic/source",
            "--out",
            str(tmp_path / "bad"),
            "--config",
            str(_yaml(tmp_path, "data: {train_fraction: 0.9, val_fraction: 0.2}")),
        ),
        "train_fraction 0.9 + data.val_fraction 0.2 exceed 1",
    )
    run = tmp_path / "run"
    config = _yaml(tmp_path, "data: {train: {name: synthetic/source}, val_fraction: 0.1}")
    result = rk("train", "--config", config, *HELD_OUT_40, "--max-steps", "2", "--out", run)
    assert result.exit_code == 0, result.output
    metrics, scores = (json.loads((run / name).read_text()) for name in ("metrics.json", "scores.json"))
    for name in ("synthetic/source (held-out)", "synthetic/source (validation)"):
        chosen, rejected = np.array(scores[name]["chosen"]), np.array(scores[name]["rejected"])
        assert len(scores[name]["pair_id"]) == metrics["eval"][name]["n"] == 40
        assert 100 * np.mean(np.where(chosen > rejected, 1.0, np.where(chosen == rejected, 0.5, 0.0))) == pytest.approx(
            metrics["eval"][name]["accuracy"], abs=1e-3
        )
        assert -1 <= metrics["eval"][name]["length_correlation"] <= 1


def _yaml(folder: Path, text: str) -> Path:
    path = folder / f"c{abs(hash(text))}.yaml"
    path.write_text(text + "\n")
    return path


def test_score_reads_prompts_as_eval_does(tmp_path: Path) -> None:
    """An HH transcript in `prompt` scores the same through `score` and through `eval --dataset file`."""
    run = tmp_path / "run"
    assert rk("train", "--train", "synthetic/source", *TINY, "--out", run).exit_code == 0
    rows = [
        {
            "prompt": f"\n\nHuman: question {i}?\n\nAssistant: first reply\n\nHuman: and then?\n\nAssistant:",
            "chosen": f"a careful answer {i}",
            "rejected": f"no {i}",
        }
        for i in range(12)
    ]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert (
        rk(
            "score", "--model", str(run / "model"), "--input", str(data), "--output", str(tmp_path / "s.jsonl")
        ).exit_code
        == 0
    )
    scored = [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    score_acc = 100 * sum(r["reward_chosen"] > r["reward_rejected"] for r in scored) / len(scored)
    assert (
        rk(
            "eval",
            "--model",
            str(run / "model"),
            "--dataset",
            "file",
            "--path",
            str(data),
            "--quiet",
            "--out",
            str(tmp_path / "ev"),
        ).exit_code
        == 0
    )
    evaluated = json.loads((tmp_path / "ev" / "metrics.json").read_text())["eval"]["pairs.jsonl"]
    assert evaluated["accuracy"] == pytest.approx(score_acc)


@pytest.mark.slow
def test_minilm_learns_real_harmless_pairs(tmp_path: Path, data_dir: Path) -> None:
    """MiniLM on 400 real hh-rlhf/harmless-base pairs; evaluated on held-out conversations only."""
    result = rk(
        "train",
        "--train",
        "hh-rlhf/harmless-base",
        "--train-pairs",
        "400",
        "--eval-pairs",
        "300",
        "--max-length",
        "128",
        "--lr",
        "3e-5",
        "--quiet",
        "--data-dir",
        str(data_dir),
        "--out",
        str(tmp_path / "r"),
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    block = metrics["eval"]["hh-rlhf/harmless-base (held-out)"]
    assert block["n"] == 300
    log = [json.loads(x) for x in (tmp_path / "r" / "log.jsonl").read_text().splitlines()]
    assert len(log) == 25
    # the length rule scores about 44% here (DATA-NOTES.md); a trained model must beat chance
    assert block["accuracy"] > 50.0


def test_score_with_a_rater_calibration(tmp_path: Path, rater_ratings_csv: Path) -> None:
    """Rewards are mapped to the rater's scale; p_chosen stays on the model's own scale; an unknown rater
    gets the population map and the summary says so."""
    maps = tmp_path / "maps.json"
    result = rk(
        "calibrate",
        "fit",
        "--ratings",
        str(rater_ratings_csv),
        "--out",
        str(maps),
        "--score-min",
        "-1000",
        "--score-max",
        "1000",
    )
    assert result.exit_code == 0, result.output
    run = tmp_path / "run"
    assert rk("train", "--train", "synthetic/source", *TINY, "--out", run).exit_code == 0
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"prompt": "hi", "chosen": "hello", "rejected": "go away"}) + "\n")
    raw, cal = tmp_path / "raw.jsonl", tmp_path / "cal.jsonl"
    assert rk("score", "--model", str(run / "model"), "--input", str(inp), "--output", str(raw)).exit_code == 0
    calibrated = ["score", "--model", run / "model", "--input", inp, "--output", cal, "--calibration", maps]
    result = rk(*calibrated, "--rater", "b")
    assert result.exit_code == 0, result.output
    r, c = json.loads(raw.read_text()), json.loads(cal.read_text())
    assert c["p_chosen"] == pytest.approx(r["p_chosen"])
    slope = (c["reward_chosen"] - c["reward_rejected"]) / (r["reward_chosen"] - r["reward_rejected"])
    assert 20.0 < slope < 40.0  # rater b's simulated slope is 30
    result = rk(*calibrated, "--rater", "nobody", "--overwrite")
    assert result.exit_code == 0 and "population map" in result.stdout


def test_installed_entry_point_runs() -> None:
    """The one subprocess test: the console script of the installed package answers and fails cleanly."""
    exe = Path(sys.executable).with_name("rewardsmith")
    env = {**os.environ, **ENV}
    ok = subprocess.run([str(exe), "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0 and "train" in ok.stdout
    bad = subprocess.run(
        [str(exe), "train", "--epochs", "one", "--out", "x"], capture_output=True, text=True, env=env, timeout=120
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stderr.startswith("error: ")


def _defaults_shown(text: str) -> list[str]:
    """Every `[default: ...]` of a help text (its wrapped lines joined), brackets inside a default kept."""
    flat = " ".join(text.split())
    found: list[str] = []
    start = flat.find("[default: ")
    while start >= 0:
        depth, end = 0, start
        for end in range(start, len(flat)):
            depth += {"[": 1, "]": -1}.get(flat[end], 0)
            if depth == 0:
                break
        found.append(flat[start + len("[default: ") : end])
        start = flat.find("[default: ", end)
    return found


def test_every_help_shows_defaults_as_typed_and_only_what_the_command_reads() -> None:
    """Walks every command's --help: no default is a Python repr; a group with a default action shows its
    command as optional; `icrm eval` lists only the config keys it reads; `icrm train`'s flags show the defaults its
    config gives, the same as its config-key list."""
    import re

    import typer

    from rewardsmith.cli.icrm import TRAIN_OPTIONS
    from rewardsmith.config import config_keys
    from rewardsmith.icrm.config import ICRMRunConfig

    def walk(command, path: list[str]):
        yield path, command
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, [*path, name])

    repr_like = re.compile(r"^\[|^\(|^\{|<function|<class|<bound|PosixPath\(|^None$|'\]|\w+Config\(|\w+Settings\(")
    helps: dict[str, str] = {}
    for path, _ in walk(typer.main.get_command(app), []):
        result = rk(*path, "--help")
        assert result.exit_code == 0, (path, result.output)
        helps[" ".join(path)] = result.stdout
        for shown in _defaults_shown(result.stdout):
            assert not repr_like.search(shown), (" ".join(path), shown)
    assert len(helps) >= 17

    assert "rewardsmith calibrate [OPTIONS] [COMMAND] [ARGS]..." in helps["calibrate"]

    listed = re.findall(r"^\s+([a-z0-9_.]+): ", helps["icrm eval"].split("Config keys", 1)[1], re.M)
    assert listed and {key.split(".")[0] for key in listed} <= {"eval", "embed_batch_size", "data_dir"}, listed

    train_help = helps["icrm train"]
    keys_part = train_help.split("Config keys", 1)[1]
    epilog = dict(re.findall(r"^\s+([a-z0-9_.]+): .*\[default: (.*)\]$", keys_part, re.M))
    assert set(epilog) == {key for key, _, _ in config_keys(ICRMRunConfig)}
    flags = option_blocks(train_help.split("Config keys", 1)[0])
    for key, spec in TRAIN_OPTIONS.items():
        name = (spec if isinstance(spec, str) else spec.flags[0]).split("/")[0]
        (flag_default,) = _defaults_shown(flags[name])
        config_default = {"--bf16": "true", "--fp32": "false"}.get(flag_default, flag_default)
        unwrapped = "".join(config_default.split())  # help wraps long defaults, also at hyphens
        assert unwrapped == "".join(epilog[key].split()), (name, flag_default, epilog[key])
    assert "[default: 4000]" in flags["--steps"] and epilog["train.max_steps"] == "4000"  # ICRMRunConfig().train
