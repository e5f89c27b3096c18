"""`rewardsmith bon` end to end on tiny local models: a random-weight Llama policy with SmolLM2's chat template samples,
TRL-trained reward models choose, a verifiable gold and a learned gold judge. Reproducible samples, resume after a
real SIGKILL during sampling and during scoring, completions made elsewhere, and bad input as one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers import one_line_error, rk, run_cli, tiny_reward_model
from rewardsmith.cli import app

pytestmark = pytest.mark.slow  # samples with a policy and runs whole commands


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory, chat_tokenizer_dir: Path) -> Path:
    """A tiny random-weight Llama causal LM with SmolLM2's tokenizer and chat template, saved as a plain folder."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from conftest import TINY_DECODER

    tok = AutoTokenizer.from_pretrained(str(chat_tokenizer_dir))
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **TINY_DECODER)
    )
    out = tmp_path_factory.mktemp("policy") / "policy"
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six prompts with verifiable instructions attached."""
    rows = [
        {
            "prompt": f"Question {i}: how do I fix a flat tyre?",
            "instructions": [{"id": "punctuation:no_comma"}, {"id": "change_case:english_lowercase"}][: 1 + i % 2],
        }
        for i in range(6)
    ]
    path = tmp_path_factory.mktemp("prompts") / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _args(policy: Path, prompts: Path, proxy: Path, gold: Path, out: Path, *extra: str | Path) -> list[str | Path]:
    return [
        "bon", "--policy", policy, "--prompts", prompts, "--proxy", proxy, "--gold", "ifeval", "--gold", gold,
        "--n", "4", "--max-new-tokens", "8", "--bootstrap", "50", "--out", out, "--quiet", *extra,
    ]  # fmt: skip


def _metrics(out: Path) -> dict:
    metrics = json.loads((out / "metrics.json").read_text())
    for volatile in ("seconds", "environment"):
        metrics.pop(volatile)
    for volatile in ("seconds", "resumed_at_prompt"):  # how this folder's sampling went, not what it drew
        metrics.get("sampling", {}).pop(volatile, None)
    return metrics


def test_bon_runs_end_to_end_and_resumes_after_kills_to_the_same_metrics(
    policy: Path, prompts_file: Path, trl_chat_model: Path, trl_plain_model: Path, tmp_path: Path
) -> None:
    whole = tmp_path / "whole"
    result = rk(*_args(policy, prompts_file, trl_chat_model, trl_plain_model, whole))
    assert result.exit_code == 0, result.output
    metrics = json.loads((whole / "metrics.json").read_text())
    assert metrics["ns"] == [1, 2, 4] and metrics["prompts"] == 6
    assert len(metrics["golds"]) == 2 and "ifeval" in metrics["golds"]
    for gold in metrics["golds"].values():
        assert len(gold["selectors"]) == 3 and {"length", "oracle"} <= set(gold["selectors"])
        oracle = gold["selectors"]["oracle"]["gold_at_n"]
        assert oracle[-1]["estimate"] >= oracle[0]["estimate"]
    samples = [json.loads(x) for x in (whole / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 6 and all(len(s["responses"]) == 4 for s in samples)
    for name in ("report.md", "report.html", "plots/gold_vs_kl_ifeval.png", "plots/length_vs_kl_ifeval.png"):
        assert (whole / name).exists(), name
    assert "gold@4" in result.stdout and "best-of-4" in result.stdout

    # Killed after 3 of 6 prompts were sampled, then after the first scorer was saved: each rerun ends as one run.
    killed = tmp_path / "killed"
    args = _args(policy, prompts_file, trl_chat_model, trl_plain_model, killed)
    first = run_cli(args, {"REWARDSMITH_FAULT_KILL_AFTER_PROMPT": "3"})
    assert first.returncode == -9, first.stderr[-2000:]
    assert len((killed / "samples.jsonl").read_text().splitlines()) == 3
    second = run_cli(args, {"REWARDSMITH_FAULT_KILL_AFTER_SCORER": "1"})
    assert second.returncode == -9, second.stderr[-2000:]
    assert len(list((killed / "scores").iterdir())) == 1
    third = run_cli(args)
    assert third.returncode == 0, third.stderr[-2000:]
    assert (killed / "samples.jsonl").read_text() == (whole / "samples.jsonl").read_text()
    assert _metrics(killed) == _metrics(whole)


def test_completions_made_elsewhere_score_like_the_same_samples_made_here(
    policy: Path, prompts_file: Path, trl_chat_model: Path, trl_plain_model: Path, tmp_path: Path
) -> None:
    here = tmp_path / "here"
    assert rk(*_args(policy, prompts_file, trl_chat_model, trl_plain_model, here)).exit_code == 0
    samples = here / "samples.jsonl"  # its own samples, in the --samples shape, given back as they are
    elsewhere = tmp_path / "elsewhere"
    result = rk(
        "bon", "--samples", samples, "--proxy", trl_chat_model, "--gold", "ifeval", "--gold", trl_plain_model,
        "--n", "4", "--bootstrap", "50", "--out", elsewhere, "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    a, b = _metrics(here), _metrics(elsewhere)
    assert a["golds"] == b["golds"]
    # A rerun of the sampled run, every sample already there, reports the same sampling facts.
    again = rk(*_args(policy, prompts_file, trl_chat_model, trl_plain_model, here))
    assert again.exit_code == 0, again.output
    assert _metrics(here) == a and a["sampling"]["sampled_tokens"] > 0 and "policy" in a["sampling"]


def test_samples_are_the_same_whatever_the_batch(policy: Path) -> None:
    from rewardsmith.data.schema import Turn
    from rewardsmith.rollouts.policy import load_policy, sample_prompt
    from rewardsmith.rollouts.prompt import BonPrompt

    loaded = load_policy(str(policy))
    prompt = BonPrompt("p1", (Turn("user", "hello there"),))
    kwargs = {"seed": 3, "temperature": 1.0, "top_p": 0.9, "max_new_tokens": 12}
    together = sample_prompt(loaded, prompt, 6, batch_size=6, **kwargs)
    apart = sample_prompt(loaded, prompt, 6, batch_size=2, **kwargs)
    assert [c.text for c in together] == [c.text for c in apart]
    assert len({c.text for c in together}) > 1  # sampled, not greedy
    again = sample_prompt(loaded, prompt, 4, batch_size=4, **kwargs)
    assert [c.text for c in again] == [c.text for c in together[:4]]  # sample k does not depend on n


def test_bad_input_is_one_line_and_exit_2(
    policy: Path, prompts_file: Path, trl_chat_model: Path, trl_plain_model: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "no-weights"
    empty.mkdir()
    (empty / "config.json").write_text((policy / "config.json").read_text())
    one_line_error(rk(*_args(empty, prompts_file, trl_chat_model, trl_plain_model, tmp_path / "a")), "no weights")
    one_line_error(
        rk(*_args(policy, prompts_file, trl_chat_model, trl_chat_model, tmp_path / "b")), "its own gold", "--gold"
    )
    one_line_error(rk(*_args(policy, prompts_file, trl_chat_model, trl_plain_model, tmp_path / "c"), "--n", "1"), "n")
    no_prompts = tmp_path / "none.jsonl"
    no_prompts.write_text("")
    one_line_error(rk(*_args(policy, no_prompts, trl_chat_model, trl_plain_model, tmp_path / "d")), "no prompts")
    shape = tmp_path / "shape.jsonl"
    shape.write_text(json.dumps({"prompt": "hi", "responses": "not a list"}) + "\n")
    result = rk(
        "bon", "--samples", shape, "--proxy", trl_chat_model, "--gold", trl_plain_model, "--out", tmp_path / "e"
    )
    one_line_error(result, "shape.jsonl", "row 1", "responses")
    short = tmp_path / "short.jsonl"
    short.write_text(json.dumps({"prompt": "hi", "responses": ["a", "b"]}) + "\n")
    result = rk(
        "bon", "--samples", short, "--proxy", trl_chat_model, "--gold", trl_plain_model, "--out", tmp_path / "f"
    )
    one_line_error(result, "short.jsonl", "fewer than n = 16")
    no_instructions = tmp_path / "plain.jsonl"
    no_instructions.write_text(json.dumps({"prompt": "hi"}) + "\n")
    one_line_error(
        rk(*_args(policy, no_instructions, trl_chat_model, trl_plain_model, tmp_path / "g")), "carry no instructions"
    )
    one_line_error(
        rk("bon", "--prompts", prompts_file, "--proxy", trl_chat_model, "--gold", "ifeval", "--out", tmp_path / "h"),
        "--policy",
    )


def test_help_shows_every_option_with_its_default() -> None:
    result = CliRunner().invoke(app, ["bon", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in (
        "--policy",
        "--samples",
        "--prompts",
        "--proxy",
        "--gold",
        "--n ",
        "--temperature",
        "--top-p",
        "--max-new-tokens",
        "--seed",
        "--bootstrap",
        "--out",
    ):
        assert option in result.stdout, option
    assert "[default: 16]" in result.stdout and "[default: 96]" in result.stdout


def test_an_ensemble_chooses_by_its_rule_over_its_members_scores(
    trl_chat_model: Path, lora_adapter: Path, trl_plain_model: Path, prompts_file: Path, tmp_path: Path
) -> None:
    import numpy as np

    from rewardsmith.jobs.ensemble import make_ensemble
    from rewardsmith.models.ensemble import combine, read_ensemble

    rows = [json.loads(x) for x in prompts_file.read_text().splitlines()]
    answers = ["patch the tube, then pump it", "no idea", "call someone who knows.", "Use a lever and a patch kit"]
    samples = tmp_path / "samples.jsonl"
    samples.write_text(
        "".join(json.dumps({**r, "responses": answers[i % 2 :] + answers[: i % 2]}) + "\n" for i, r in enumerate(rows))
    )
    reference = tmp_path / "reference.jsonl"
    reference.write_text(
        "".join(json.dumps({"prompt": r["prompt"], "response": a}) + "\n" for r in rows for a in answers)
    )
    rs_model = tiny_reward_model(tmp_path / "rs" / "model", seed=11)
    members = [str(rs_model), str(trl_chat_model), str(lora_adapter)]
    for rule in ("mean", "min"):
        make_ensemble(members, tmp_path / f"ens-{rule}", rule, reference=reference, progress=False)
    out = tmp_path / "run"
    result = rk(
        "bon", "--samples", samples, "--proxy", tmp_path / "ens-mean", "--proxy", tmp_path / "ens-min",
        "--proxy", rs_model, "--proxy", trl_chat_model, "--proxy", lora_adapter, "--gold", trl_plain_model,
        "--n", "4", "--bootstrap", "50", "--out", out, "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    saved = {}
    for path in (out / "scores").glob("proxy-*.json"):
        record = json.loads(path.read_text())
        saved[Path(record["identity"]["source"]).resolve()] = np.array(record["values"])
    own = np.stack([saved[Path(m).resolve()] for m in members])
    for rule in ("mean", "min"):
        expected, _ = combine(own, read_ensemble(tmp_path / f"ens-{rule}"))
        assert np.abs(saved[(tmp_path / f"ens-{rule}").resolve()] - expected).max() < 1e-6
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["proxies"]) == 5


def _samples_file(prompts_file: Path, path: Path, answers: list[str] | None = None) -> Path:
    rows = [json.loads(x) for x in prompts_file.read_text().splitlines()]
    answers = answers or ["patch the tube, then pump it", "no idea", "Call someone who knows.", "use a lever"]
    path.write_text("".join(json.dumps({**r, "responses": answers}) + "\n" for r in rows))
    return path


def _bon(samples: Path, proxy: Path, gold: str | Path, out: Path, *extra: str | Path):
    return rk(
        "bon", "--samples", samples, "--proxy", proxy, "--gold", gold, "--n", "4", "--bootstrap", "20", "--out", out,
        "--quiet", *extra,
    )  # fmt: skip


def test_a_rerun_never_reuses_saved_scores_of_other_inputs(
    prompts_file: Path, trl_chat_model: Path, trl_plain_model: Path, tmp_path: Path
) -> None:
    samples = _samples_file(prompts_file, tmp_path / "samples.jsonl")
    out = tmp_path / "run"
    assert _bon(samples, trl_chat_model, trl_plain_model, out).exit_code == 0
    saved = next((out / "scores").glob("proxy-*.json"))
    first = json.loads(saved.read_text())
    # Other scoring options: the proxy and the learned gold are scored again, not read back.
    assert _bon(samples, trl_chat_model, trl_plain_model, out, "--max-length", "16").exit_code == 0
    cut = json.loads(saved.read_text())
    assert cut["identity"]["scoring"]["max_length"] == 16 and cut["values"] != first["values"]
    # The samples file edited in place (same texts, other instructions): the rerun is refused in one line.
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    samples.write_text(
        "".join(json.dumps({**r, "instructions": [{"id": "punctuation:no_comma"}]}) + "\n" for r in rows)
    )
    one_line_error(_bon(samples, trl_chat_model, "ifeval", out), "other inputs", "samples")
    # The proxy retrained in place (its files' bytes changed): scored again under its new fingerprint.
    proxy = tmp_path / "proxy"
    shutil.copytree(trl_chat_model, proxy)
    runs = tmp_path / "run2"
    assert _bon(samples, proxy, "ifeval", runs).exit_code == 0
    before = json.loads((runs / "scores" / "proxy-proxy.json").read_text())
    from safetensors.torch import load_file, save_file

    weights = proxy / "model.safetensors"
    tensors = load_file(str(weights))
    head = next(k for k in tensors if k.startswith("score"))
    tensors[head] = tensors[head] * 3 + 1
    save_file(tensors, str(weights), metadata={"format": "pt"})
    assert _bon(samples, proxy, "ifeval", runs).exit_code == 0
    after = json.loads((runs / "scores" / "proxy-proxy.json").read_text())
    assert after["identity"]["fingerprint"] != before["identity"]["fingerprint"]
    assert after["values"] != before["values"]


def test_a_copy_of_the_proxy_or_an_ensemble_holding_it_is_no_gold(
    prompts_file: Path, trl_chat_model: Path, trl_plain_model: Path, tmp_path: Path
) -> None:
    from rewardsmith.jobs.ensemble import make_ensemble

    samples = _samples_file(prompts_file, tmp_path / "samples.jsonl")
    copy = tmp_path / "copy"
    shutil.copytree(trl_chat_model, copy)
    one_line_error(_bon(samples, trl_chat_model, copy, tmp_path / "a"), "same weights", "own gold")
    reference = tmp_path / "reference.jsonl"
    reference.write_text("".join(json.dumps({"prompt": "q", "response": a}) + "\n" for a in ("x y", "z", "a b c")))
    ensemble = tmp_path / "ensemble"
    make_ensemble([str(copy), str(trl_plain_model)], ensemble, reference=reference, progress=False)
    one_line_error(_bon(samples, trl_chat_model, ensemble, tmp_path / "b"), "same weights")
    one_line_error(_bon(samples, ensemble, trl_plain_model, tmp_path / "c"), "same weights")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # refused before writing anything


def test_bad_samples_and_golds_are_named_before_anything_is_written(
    policy: Path, prompts_file: Path, trl_chat_model: Path, trl_plain_model: Path, tmp_path: Path
) -> None:
    samples = _samples_file(prompts_file, tmp_path / "samples.jsonl")
    one_line_error(_bon(samples, trl_chat_model, "ifevl", tmp_path / "a"), "unknown gold 'ifevl'", "ifeval", "math")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(samples.read_text().splitlines()[0] + "\n{not json\n")
    one_line_error(_bon(broken, trl_chat_model, "ifeval", tmp_path / "b"), "broken.jsonl", "row 2", "not valid JSON")
    # A gold that cannot score the prompts is caught before the policy samples a single one.
    one_line_error(rk(*_args(policy, prompts_file, trl_chat_model, "math", tmp_path / "c")), "carry no answer")
    for out in ("a", "b", "c"):
        assert not (tmp_path / out).exists(), out  # no manifest left to refuse the corrected rerun


def test_a_gold_that_scores_nothing_says_why_and_one_that_skips_some_counts_them(
    prompts_file: Path, trl_chat_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    import rewardsmith.jobs.bon as bon_job
    from rewardsmith.rollouts.gold import Gold

    samples = _samples_file(prompts_file, tmp_path / "samples.jsonl")
    blanks = {"none": 1.0, "some": 0.25}

    def gold_of(spec: str) -> Gold:
        def score(_s, prompts, responses, _c):  # NaN where the gold "cannot check" a sample
            values = np.arange(len(prompts) * 4, dtype=float).reshape(len(prompts), 4) % 3
            values[:, : int(4 * blanks[spec])] = np.nan
            return values

        return Gold(spec, spec, None, score)

    monkeypatch.setattr(bon_job, "resolve_gold", gold_of)
    one_line_error(
        _bon(samples, trl_chat_model, "none", tmp_path / "a"), "--gold none", "scored none of the 24 samples"
    )
    some = _bon(samples, trl_chat_model, "some", tmp_path / "b")
    assert some.exit_code == 0, some.output
    assert "gold some: 6 of 24 samples could not be scored" in some.stdout


def test_no_file_outside_the_run_folder_is_written_through_a_link(
    policy: Path, prompts_file: Path, trl_chat_model: Path, trl_plain_model: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    args = _args(policy, prompts_file, trl_chat_model, trl_plain_model, out)
    killed = run_cli(args, {"REWARDSMITH_FAULT_KILL_AFTER_PROMPT": "2"})
    assert killed.returncode == -9, killed.stderr[-2000:]
    outside = tmp_path / "outside" / "target.jsonl"  # a dangling link: following it would create this file
    (out / "samples.jsonl").unlink()
    (out / "samples.jsonl").symlink_to(outside)
    result = rk(*args)
    one_line_error(result, "symbolic link", "samples.jsonl")
    assert not outside.exists() and not outside.parent.exists()
