"""What a newcomer meets on first use: stdout holds only rewardsmith's own output, long commands say what they will
cost before they start, saved weights get the user's file modes, messages name what they refuse and why, and
/dev/stdin can be scored."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from helpers import ENV, TINY, ok, rk

PAIRS = [{"prompt": f"question {i}", "chosen": f"a kind answer {i}", "rejected": f"no {i}"} for i in range(8)]
CLI = [sys.executable, "-m", "rewardsmith.cli"]


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT reward model's run folder, written under umask 022."""
    run = tmp_path_factory.mktemp("trained") / "run"
    with umask(0o022):
        ok(rk("train", "--train", "synthetic/source", *TINY, "--out", run))
    return run


# ---------------------------------------------------------------------------------------------------------
# stdout holds only rewardsmith's own output


def test_third_party_warnings_stay_off_stdout(tmp_path: Path) -> None:
    """DeepSpeed, imported (by a DeepSpeed launch, or accelerate's unwrap outside no_deepspeed_probe), logs
    "[WARNING] ... Setting accelerator to CPU" through a logger aimed at stdout: in a fresh process, stdout holds
    only rewardsmith's lines, and the accelerator notice (about a device rewardsmith chooses itself) is not repeated
    on stderr either."""
    done = subprocess.run(
        [*CLI, "train", "--train", "synthetic/source", *TINY, "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env={**os.environ, **ENV},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert not [line for line in done.stdout.splitlines() if "[WARNING]" in line or "[INFO]" in line], done.stdout
    assert done.stdout.rstrip().splitlines()[-1].startswith("wrote ")
    assert "Setting accelerator" not in done.stderr
    if importlib.util.find_spec("deepspeed") is not None:  # the import the notice comes with did happen
        probe = "from rewardsmith.io.processes import import_deepspeed; import_deepspeed()"
        quiet = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
        assert quiet.returncode == 0 and "[WARNING]" not in quiet.stdout, quiet.stdout


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="DeepSpeed is not installed here")
def test_a_run_in_one_process_does_not_import_deepspeed(tmp_path: Path) -> None:
    """accelerate's unwrap, and transformers' save_pretrained through it, import DeepSpeed wherever it is installed
    (2 s of a short run, benchmarks/bench_train_process.py). A `train` in one process (a checkpoint, the unwrap
    after the loop, the saved model) imports neither it nor transformers' Trainer utilities."""
    run = tmp_path / "run"
    probe = (
        "import sys\n"
        "from rewardsmith.launch import main\n"
        f"sys.argv = ['rewardsmith', 'train', '--train', 'synthetic/source', *{list(TINY)!r},"
        f" '--set', 'train.checkpoint_every=1', '--out', {str(run)!r}]\n"
        "try:\n    main()\nexcept SystemExit as done:\n    assert not done.code, done.code\n"
        "print(sorted(m for m in ('deepspeed', 'transformers.optimization') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env={**os.environ, **ENV}, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    assert json.loads((run / "manifest.json").read_text(encoding="utf-8"))["status"] == "complete"
    assert (run / "model" / "model.safetensors").is_file()


# ---------------------------------------------------------------------------------------------------------
# What a long command will cost, said before it starts


def _smollm2_sized(device: str = "meta") -> torch.nn.Module:
    """SmolLM2-135M's architecture (its config values), on the meta device: the shapes without the memory."""
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        tie_word_embeddings=True,
    )
    with torch.device(device):
        return LlamaModel(config)


def test_the_cost_of_a_smollm2_sized_run_matches_what_was_measured() -> None:
    """From the parameter count alone: SmolLM2-135M trains at 1-1.7 pairs/s at 128 tokens on 2 cores (16 pairs a
    step: 9-16 s) and peaks at 8-12 GB (../shared/docs/DESIGN.md); its weights are 538 MB in fp32."""
    from rewardsmith.train.cost import training_cost, write_line

    model = _smollm2_sized()
    step = {"input_ids": torch.zeros(32, 128, dtype=torch.long)}  # 16 pairs, both sides, 128 tokens
    cost = training_cost(model, [step], grad_accum=1, steps=100, bf16=False, checkpoints=True)
    assert cost is not None and cost.worth_saying()
    assert 9.0 <= cost.step_seconds <= 16.0
    assert cost.peak_bytes is not None and 8e9 <= cost.peak_bytes <= 12e9
    # bf16 autocast trained it no faster: 16 pairs of 192 tokens took 23.5 s a step (configs/bon-smollm2-helpful.yaml,
    # 0.68 pairs/s); the estimate must not promise a bf16 speed-up the CPU does not give.
    long = {"input_ids": torch.zeros(32, 192, dtype=torch.long)}
    bf16 = training_cost(model, [long], grad_accum=1, steps=50, bf16=True, checkpoints=True)
    assert bf16 is not None and 18.0 <= bf16.step_seconds <= 30.0
    line = cost.line()
    assert line.startswith("cost: a 134.5M-parameter model") and "a step" in line and "weights of about 538 MB" in line
    assert write_line(model, "export to out") == "cost: export to out writes about 538 MB (134.5M parameters)"
    # A tiny model on a short run: nothing to say.
    from transformers import LlamaConfig, LlamaModel

    tiny = LlamaModel(LlamaConfig(vocab_size=100, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                  num_attention_heads=2, num_key_value_heads=1))  # fmt: skip
    small = training_cost(tiny, [step], grad_accum=1, steps=2, bf16=False, checkpoints=False)
    assert small is not None and not small.worth_saying()
    assert write_line(tiny, "export") is None


def test_training_says_its_cost_on_stderr_before_the_first_step(tmp_path: Path, monkeypatch) -> None:
    import rewardsmith.train.cost as cost

    monkeypatch.setattr(cost, "LARGE_PARAMETERS", 1)  # the tiny model counts as large here
    result = rk("train", "--train", "synthetic/source", *TINY[:-1], "--out", tmp_path / "run")
    ok(result)
    lines = result.stderr.splitlines()
    said = [i for i, line in enumerate(lines) if line.startswith("cost: a ")]
    assert len(said) == 1 and "a step on 2 free CPU cores" in lines[said[0]], result.stderr
    assert said[0] < next(i for i, line in enumerate(lines) if line.startswith("train:")), result.stderr
    assert "cost:" not in result.stdout


# ---------------------------------------------------------------------------------------------------------
# Saved weights get the user's umask


def test_saved_weights_have_the_modes_of_the_users_umask(trained: Path, tmp_path: Path) -> None:
    files = [p for p in (trained / "model").rglob("*") if p.is_file()]
    assert any(p.suffix == ".safetensors" for p in files)
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert stat.S_IMODE((trained / "model").stat().st_mode) == 0o755
    # Another umask: safetensors' own 0600 becomes the umask's 0640.
    from safetensors.torch import save_file

    from rewardsmith.io.atomic import atomic_folder

    with umask(0o027), atomic_folder(tmp_path / "weights") as folder:
        save_file({"w": torch.zeros(2)}, str(folder / "w.safetensors"))
        (folder / "sub").mkdir()
    assert stat.S_IMODE((tmp_path / "weights" / "w.safetensors").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "weights" / "sub").stat().st_mode) == 0o750


# ---------------------------------------------------------------------------------------------------------
# Messages that say what they refuse, and the end of a run said once


def test_a_path_rewardsmith_wrote_is_not_called_foreign(trained: Path, tmp_path: Path) -> None:
    inp = jsonl(tmp_path / "in.jsonl", PAIRS)
    run_file = rk("score", "--model", trained / "model", "--input", inp, "--out", trained / "scores.json")
    assert run_file.exit_code == 2 and "not written by rewardsmith" not in run_file.stderr
    assert f"is part of the `train` run folder {trained}" in run_file.stderr, run_file.stderr
    weights = rk(
        "score", "--model", trained / "model", "--input", inp, "--out", trained / "model" / "model.safetensors"
    )
    assert weights.exit_code == 2 and "is part of a rewardsmith model folder" in weights.stderr, weights.stderr
    model = rk("export", "--model", trained / "model", "--out", trained / "model")
    assert model.exit_code == 2 and "did not write" not in model.stderr, model.stderr
    assert f"{trained / 'model'}: exists and is a rewardsmith model folder" in model.stderr
    run = rk("export", "--model", trained / "model", "--out", trained)
    assert run.exit_code == 2 and f"{trained}: exists and is the `train` run folder" in run.stderr, run.stderr
    copied = tmp_path / "copied-model"
    shutil.copytree(trained / "model", copied)
    again = rk("export", "--model", copied, "--out", copied)
    assert again.exit_code == 2 and f"{copied}: exists and is a rewardsmith model folder" in again.stderr
    # A file rewardsmith never wrote is still called that.
    (tmp_path / "mine.jsonl").write_text("my notes\n")
    theirs = rk("score", "--model", trained / "model", "--input", inp, "--out", tmp_path / "mine.jsonl")
    assert theirs.exit_code == 2 and "exists and was not written by rewardsmith" in theirs.stderr


def test_calibrate_fit_says_what_it_wrote_once(tmp_path: Path, rater_ratings_csv: Path) -> None:
    result = rk("calibrate", "fit", "--ratings", rater_ratings_csv, "--out", tmp_path / "maps.json")
    ok(result)
    assert [line for line in result.stdout.splitlines() if "wrote" in line] == [f"wrote {tmp_path / 'maps.json'}"]


def test_a_config_that_does_not_match_its_weights_names_the_shapes(trained: Path, tmp_path: Path) -> None:
    """transformers refuses a size mismatch with "... look at the above report!", a report nobody sees (its
    warnings are kept quiet): the one line names the weights instead."""
    model = tmp_path / "model"
    shutil.copytree(trained / "model", model)
    config = json.loads((model / "config.json").read_text())
    config["intermediate_size"] *= 2
    (model / "config.json").write_text(json.dumps(config))
    result = rk("score", "--model", model, "--input", jsonl(tmp_path / "in.jsonl", PAIRS), "--out", tmp_path / "o")
    assert result.exit_code == 2 and "above report" not in result.stderr
    assert "have another shape than the config gives" in result.stderr and "intermediate" in result.stderr


def test_export_names_the_chat_template_once(trl_chat_model: Path, tmp_path: Path) -> None:
    result = rk("export", "--model", trl_chat_model, "--out", tmp_path / "hf")
    ok(result)
    assert "chat chat" not in result.stdout and "tokenizer with its own chat template" in result.stdout


# ---------------------------------------------------------------------------------------------------------
# Streams as input


def test_score_reads_a_pipe(trained: Path, tmp_path: Path) -> None:
    """A FIFO (what /dev/stdin or <(...) is) is read once, as JSON lines, whatever its name."""
    fifo = tmp_path / "stdin"
    os.mkfifo(fifo)
    text = "".join(json.dumps(r) + "\n" for r in PAIRS[:3])

    def feed() -> None:
        with open(fifo, "w", encoding="utf-8") as handle:
            handle.write(text)

    writer = threading.Thread(target=feed)
    writer.start()
    result = rk("score", "--model", trained / "model", "--input", fifo, "--out", tmp_path / "o.jsonl", "-q")
    writer.join(timeout=60)
    ok(result)
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert [r["prompt"] for r in rows] == [p["prompt"] for p in PAIRS[:3]] and all("p_chosen" in r for r in rows)


def test_score_reads_dev_stdin(trained: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [*CLI, "score", "--model", str(trained / "model"), "--input", "/dev/stdin", "--out", str(tmp_path / "o.jsonl")],
        input="".join(json.dumps(r) + "\n" for r in PAIRS[:2]),
        capture_output=True,
        text=True,
        env={**os.environ, **ENV},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "read /dev/stdin: 2 rows" in done.stdout
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 2


# ---------------------------------------------------------------------------------------------------------
# serve says when it stops


@pytest.mark.parametrize("when", ["serving", "starting"])
def test_serve_says_when_it_begins_to_stop(trained: Path, when: str) -> None:
    """One line on stderr as the shutdown begins (it may take --shutdown-timeout-s), also for a signal that comes
    while the server is still starting; "stopped" on stdout when it is done."""
    import httpx

    server = subprocess.Popen(
        [*CLI, "serve", "--model", str(trained / "model"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **ENV},
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()  # printed once the model is loaded and the port open
        assert first.startswith("serving "), first
        if when == "serving":
            url = first.split(" on ", 1)[1].split()[0]
            assert httpx.get(f"{url}/health", timeout=60).status_code == 200
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 0, err
    assert out.strip().splitlines()[-1] == "stopped"
    stopping = [line for line in err.splitlines() if line.startswith("stopping: ")]
    assert len(stopping) == 1 and "finish within" in stopping[0], err


# ---------------------------------------------------------------------------------------------------------
# A small templated file: the empty held-out part is said, and the row split is offered


def test_train_says_when_its_held_out_part_is_empty_and_splits_by_row_on_request(tmp_path: Path) -> None:
    from rewardsmith.data.schema import PreferencePair, Turn
    from rewardsmith.data.splits import hash_fraction

    def in_training(text: str) -> bool:
        return hash_fraction(PreferencePair((Turn("user", text),), "a", "b").group_key(), "split") < 0.8

    opening = next(t for t in (f"Please rate reply {i}." for i in range(1000)) if in_training(t))
    rows = [
        {"prompt": f"\n\nHuman: {opening}\n\nAssistant: Send it.\n\nHuman: reply {i}\n\nAssistant:",
         "chosen": f" A fair rating of reply {i}.", "rejected": " No."}
        for i in range(24)
    ]  # fmt: skip
    path = jsonl(tmp_path / "templated.jsonl", rows)
    result = rk("train", "--train", "file", "--path", path, *TINY, "--out", tmp_path / "hash")
    ok(result)
    warnings = [line for line in result.stdout.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "held-out part of templated.jsonl is empty" in warnings[0], result.stdout
    assert "24 pairs share 1 distinct first turn" in warnings[0] and "--split-by row" in warnings[0]
    assert "held-out part of templated.jsonl is empty" in (tmp_path / "hash" / "report.md").read_text()
    by_row = rk("train", "--train", "file", "--path", path, *TINY, "--split-by", "row", "--out", tmp_path / "row")
    ok(by_row)
    assert "warning:" not in by_row.stdout
    metrics = json.loads((tmp_path / "row" / "metrics.json").read_text())
    assert metrics["eval"]["templated.jsonl (held-out)"]["n"] > 0 and metrics["config"]["data"]["split"] == "row"
