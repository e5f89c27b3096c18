"""Data-parallel scoring: under `accelerate launch` every process runs its share of the single-process batch plan
(batches p, p + N, ...) and the rows are gathered back in input order (evaluate.scoring.batched_forward), so
`score`, `eval`, the W2S teacher's labels and the ICRM scorers give the very floats of one process, and the main
process alone writes.

Two CPU processes over gloo, started the way accelerate starts them on GPUs: `accelerate launch --multi_gpu
--num_processes 2` on a machine without GPUs runs two torchrun processes, which join as MULTI_CPU. (With
accelerate 1.15, `accelerate launch --cpu --num_processes 2` starts a single process unless mpirun is given a
hostfile, so that form would compare one process with itself.) Both runs use one thread per process, so the
kernels are the same; the comparison is byte for byte, no tolerance."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import launcher
import pytest
import torch
from safetensors.torch import load_file

SCRIPT = Path(__file__).with_name("sharded_scoring.py")
pytestmark = pytest.mark.slow


def _run(args: list[str], processes: int, module: bool = False) -> subprocess.CompletedProcess[str]:
    """`python [-m] ARGS` in one process, or the same under `accelerate launch` with two."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = launcher.command([*(["-m"] if module else []), *args], processes)
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scalar and an in-context tiny-bert model folder, a scoring file, demonstrations and a pair file."""
    out = tmp_path_factory.mktemp("sharded-models")
    _run([str(SCRIPT), "make-models", "--out", str(out)], 1)
    return out


def test_every_batched_path_splits_the_batches_and_matches_one_process(tmp_path: Path) -> None:
    _run([str(SCRIPT), "score", "--out", str(tmp_path / "one")], 1)
    _run([str(SCRIPT), "score", "--out", str(tmp_path / "two")], 2)
    one, two = (
        load_file(str(tmp_path / "one" / "outputs.safetensors")),
        load_file(str(tmp_path / "two" / "outputs.safetensors")),
    )
    assert one.keys() == two.keys()
    for key in one:
        assert torch.equal(one[key], two[key]), key
    single = json.loads((tmp_path / "one" / "seen-0.json").read_text())["batches"]
    shares = [json.loads((tmp_path / "two" / f"seen-{p}.json").read_text()) for p in (0, 1)]
    assert [s["count"] for s in shares] == [2, 2]
    for path in ("reward", "set", "concat"):
        # Each process ran every other batch of the one-process plan (the scalar model's plan: score_pairs at
        # batch size 4, then embed_encoded at 5), never the same batch twice.
        reward_plans = _plans(single[path], path)
        expected = [[b for plan in reward_plans for b in plan[p::2]] for p in (0, 1)]
        assert [s["batches"][path] for s in shares] == expected, path
        assert all(s["batches"][path] for s in shares)


def _plans(batches: list[int], path: str) -> list[list[int]]:
    """The one-process batch sizes of `path`, cut into the plans of its scoring calls (one per call)."""
    if path == "reward":  # score_pairs of 74 texts at batch size 4, then embed_encoded of the same at 5
        return [batches[:19], batches[19:]]
    if path == "set":  # the 4 demonstrations' 8 texts at 4 a batch, then 74 texts at 4
        return [batches[:2], batches[2:]]
    return [batches]


def test_processes_holding_different_texts_refuse_instead_of_hanging(tmp_path: Path) -> None:
    _run([str(SCRIPT), "different-texts", "--out", str(tmp_path)], 2)
    for p in (0, 1):
        assert "hold different texts" in (tmp_path / f"refused-{p}.txt").read_text()


@pytest.mark.parametrize("kind", ["reward", "icrm"])
def test_score_command_writes_the_same_bytes_from_two_processes(models: Path, tmp_path: Path, kind: str) -> None:
    outputs = {}
    for processes in (1, 2):
        out = tmp_path / f"scores-{processes}.jsonl"
        args = [
            "rewardsmith",
            "score",
            "--model",
            str(models / kind),
            "--input",
            str(models / "rows.jsonl"),
            "--out",
            str(out),
            "--batch-size",
            "4",
            "--quiet",
            *(["--demos", str(models / "demos.jsonl")] if kind == "icrm" else []),
        ]
        result = _run(args, processes, module=True)
        outputs[processes] = out.read_bytes()
        # Under a launcher only the main process prints: one summary, as from one process.
        assert result.stdout.count(f"wrote {out}") == 1, result.stdout
    assert outputs[1] == outputs[2]
    rows = [json.loads(line) for line in outputs[2].decode().splitlines()]
    assert len(rows) == 45 and all(("reward" in r) != ("reward_chosen" in r) for r in rows)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".scores-1.jsonl.rewardsmith.json",
        ".scores-2.jsonl.rewardsmith.json",
        "scores-1.jsonl",
        "scores-2.jsonl",
    ]


def test_eval_command_from_two_processes_writes_one_run_folder_with_the_same_scores(
    models: Path, tmp_path: Path
) -> None:
    folders = {}
    for processes in (1, 2):
        out = tmp_path / f"eval-{processes}"
        _run(
            [
                "rewardsmith",
                "eval",
                "--model",
                str(models / "reward"),
                "--dataset",
                "file",
                "--path",
                str(models / "pairs.jsonl"),
                "--out",
                str(out),
                "--batch-size",
                "4",
                "--quiet",
            ],
            processes,
            module=True,
        )
        folders[processes] = out
    one, two = folders[1], folders[2]
    assert (one / "scores.json").read_bytes() == (two / "scores.json").read_bytes()
    metrics = [json.loads((f / "metrics.json").read_text()) for f in (one, two)]
    assert metrics[0]["eval"] == metrics[1]["eval"]
    manifests = [json.loads((f / "manifest.json").read_text()) for f in (one, two)]
    assert [m["status"] for m in manifests] == ["complete", "complete"]
    assert manifests[0]["files"] == manifests[1]["files"]
    assert manifests[0]["checksums"].keys() == manifests[1]["checksums"].keys()
    assert sorted(p.relative_to(one).as_posix() for p in one.rglob("*")) == sorted(
        p.relative_to(two).as_posix() for p in two.rglob("*")
    )
