"""Weights load exactly or not at all. A model folder whose config.json does not match its weight files (a layer
added or removed, another model_type, an adapter config naming other modules) would score with randomly
initialised or dropped weights; every command that loads a model refuses it in one line naming the two files and
the first keys, exit 2, and writes nothing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rewardsmith.cli import app
from rewardsmith.errors import CheckpointError
from rewardsmith.models.loading import load_reward_model

pytestmark = pytest.mark.slow  # trains a tiny model and runs whole commands

ENV = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def rk(*args: str | Path):
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV)


def edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def one_line_exit_2(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT reward model trained by rewardsmith (backbone stored in full: config.json + model.safetensors)."""
    run = tmp_path_factory.mktemp("trained") / "run"
    result = rk(
        "train", "--train", "synthetic/source", "--backbone", "tiny-bert", "--max-steps", "2", "--train-pairs", "32",
        "--eval-pairs", "16", "--quiet", "--out", run,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads((run / "model" / "rewardsmith.json").read_text())["backbone_storage"] == "full"
    return run / "model"


def _layers(delta: int) -> Callable[[dict], None]:
    def change(config: dict) -> None:
        config["num_hidden_layers"] += delta

    return change


def _gpt2(config: dict) -> None:
    config["model_type"] = "gpt2"
    config["architectures"] = ["GPT2Model"]


BREAKAGES = {
    "a layer added": (_layers(+1), "not in the files"),
    "a layer removed": (_layers(-1), "have no place"),
    "model_type gpt2": (_gpt2, "not in the files"),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
@pytest.mark.parametrize("command", ["score", "eval", "export", "serve", "calibrate"])
def test_a_config_that_does_not_match_its_weights_is_refused_everywhere(
    trained: Path, tmp_path: Path, breakage: str, command: str
) -> None:
    change, needle = BREAKAGES[breakage]
    model = tmp_path / "model"
    shutil.copytree(trained, model)
    edit_json(model / "config.json", change)
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"prompt": "hi", "chosen": "hello there", "rejected": "no"}) + "\n")
    ratings = tmp_path / "ratings.csv"
    rows = [f"{r},{i},{10 * i + len(r)},0,question {i},answer {i} from {r}" for r in ("a", "b") for i in range(8)]
    ratings.write_text("rater_id,item_id,score,model_score,prompt,response\n" + "\n".join(rows) + "\n")
    out = tmp_path / ("out.json" if command == "calibrate" else "out")
    args: dict[str, list[str | Path]] = {
        "score": ["score", "--model", model, "--input", inp, "--out", out],
        "eval": ["eval", "--model", model, "--dataset", "file", "--path", inp, "--out", out],
        "export": ["export", "--model", model, "--out", out],
        "serve": ["serve", "--model", model, "--port", "0"],
        "calibrate": ["calibrate", "fit", "--model", model, "--ratings", ratings, "--out", out],
    }
    line = one_line_exit_2(rk(*args[command]), "config.json", "model.safetensors", needle)
    assert "encoder.layer" in line or "embeddings" in line or "h.0" in line  # the first keys are named
    # Nothing scored is written (a run folder keeps only its manifest, so the same command can run again).
    written = {p.name for p in out.iterdir()} if out.is_dir() else set()
    assert not out.is_file() and written <= {"manifest.json", ".rewardsmith.lock"}, written


def test_the_same_folder_unbroken_loads(trained: Path) -> None:
    assert load_reward_model(trained).kind == "rewardsmith"


@pytest.mark.parametrize("kind", ["trl_chat_model", "openrlhf_model"])
@pytest.mark.parametrize("delta", [+1, -1])
def test_models_from_elsewhere_with_another_depth_are_refused(
    kind: str, delta: int, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    folder = tmp_path / "m"
    shutil.copytree(request.getfixturevalue(kind), folder)

    def change(config: dict) -> None:
        config["num_hidden_layers"] += delta
        if isinstance(config.get("layer_types"), list):  # Qwen2 checks the two agree
            config["layer_types"] = config["layer_types"][:1] * config["num_hidden_layers"]

    edit_json(folder / "config.json", change)
    with pytest.raises(CheckpointError, match=r"config\.json does not match model\.safetensors: .*layers\.[12]\."):
        load_reward_model(folder)


def test_a_lora_adapter_whose_config_names_other_modules_is_refused(lora_adapter: Path, tmp_path: Path) -> None:
    folder = tmp_path / "adapter"
    shutil.copytree(lora_adapter, folder)
    # k_proj gets a LoRA layer the file has no weights for: peft would leave it at its initialisation.
    edit_json(folder / "adapter_config.json", lambda c: c.update(target_modules=["q_proj", "k_proj", "v_proj"]))
    with pytest.raises(
        CheckpointError, match=r"adapter_config\.json does not match adapter_model\.safetensors.*k_proj"
    ):
        load_reward_model(folder)
    edit_json(folder / "adapter_config.json", lambda c: c.update(target_modules=["q_proj"]))
    with pytest.raises(CheckpointError, match=r"have no place .*v_proj"):
        load_reward_model(folder)
