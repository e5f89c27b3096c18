"""The gold tracker of an RL run: a TRL TrainerCallback that, before training and every `every` steps, samples the
current policy on held-out prompts, scores the samples with each gold (rewardsmith.rollouts' gold modules: ifeval,
math, a learned gold) and with the proxy the policy is trained on, and estimates the KL divergence from the
reference policy, writing one point per evaluation to points.jsonl (appended and flushed: a killed run keeps the
points it made), with its per-prompt values (arms tracked on the same prompts compare paired over them), and the
samples themselves to tracker-samples.jsonl. Plotting gold and proxy against KL gives the over-optimisation curve
(Gao et al. 2022).

KL(policy || reference) is estimated on the held-out prompts from the samples themselves (drawn from the policy at
temperature 1, no top-p, so the estimate is unbiased): per sample, the sum over its completion tokens (its EOS
token included when it ended) of log pi(token) - log pi_ref(token), both from forward passes on the same tokens;
per prompt, the mean over its samples; the point and a 95% bootstrap CI over prompts. The reference is the policy
as it was when training began: a frozen copy, or for a LoRA policy the base model with its adapters disabled.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rewardsmith.config import MAX_SEED, option
from rewardsmith.data.schema import Turn
from rewardsmith.rollouts.gold import GoldContext, ModelScorer, resolve_gold
from rewardsmith.rollouts.policy import Policy, sample_prompt
from rewardsmith.rollouts.prompt import BonPrompt
from rewardsmith.stats import mean_interval

# (prompt turns, response) items -> rewards (M,): the proxy the policy is trained on (its server, or in process).
ProxyScorer = Callable[[Sequence[tuple[tuple[Turn, ...], str]]], np.ndarray]
POINTS_FILE = "points.jsonl"
SAMPLES_FILE = "tracker-samples.jsonl"  # every point's samples, one line per prompt


def served_proxy(client: Any, rater: str | None = None, standard: str | None = None) -> ProxyScorer:
    """The proxy as the policy gets it: rewards from a rewardsmith.client.RewardClient (prompts sent as chat lists),
    on `rater`'s scale or steered by the registered `standard` where the policy's reward function is."""

    def score(items: Sequence[tuple[tuple[Turn, ...], str]]) -> np.ndarray:
        # An empty response has no reward (the server refuses it, as GRPOReward never sends it): NaN, left out of
        # the prompt's mean. A policy that collapses to empty answers must not end the run that shows it.
        keep = [k for k, (_, response) in enumerate(items) if response.strip()]
        out = np.full(len(items), np.nan)
        if keep:
            prompts = [[{"role": t.role, "content": t.content} for t in items[k][0]] for k in keep]
            rewards = client.rewards(prompts, [items[k][1] for k in keep], rater, standard)
            out[keep] = np.asarray(rewards, dtype=np.float64)
        return out

    return score


@dataclass
class TrackerSettings:
    """How the gold is tracked on the held-out prompts."""

    every: int = option(10, "steps between the tracker's points (0: only before training and at its end)", min=0)
    samples: int = option(4, "completions per held-out prompt at each point", min=1)
    max_new_tokens: int = option(64, "their budget, in tokens (the run's completion length)", min=1)
    seed: int = option(0, "seed of every tracker sample (with the step)", min=0, max=MAX_SEED)
    n_boot: int = option(1000, "bootstrap replicates over prompts of the CIs", min=0)


def _row_means(values: np.ndarray) -> np.ndarray:
    """Each prompt's mean over its samples with a value (NaN where none has one)."""
    counts = np.isfinite(values).sum(axis=1)
    sums = np.where(np.isfinite(values), values, 0.0).sum(axis=1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _finite_list(values: np.ndarray) -> list[float | None]:
    return [float(v) if np.isfinite(v) else None for v in values]


def sequence_logprobs(model: Any, prompt_ids: list[int], completions: Sequence[list[int]]) -> np.ndarray:
    """Sum of log p(token) over each completion's tokens after the prompt (one forward pass per completion)."""
    device = next(model.parameters()).device
    out = []
    with torch.no_grad():
        for tokens in completions:
            if not tokens:
                out.append(0.0)
                continue
            ids = torch.tensor([prompt_ids + tokens], device=device)
            logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
            logp = torch.log_softmax(logits, dim=-1).gather(1, ids[0, len(prompt_ids) :, None])[:, 0]
            out.append(float(logp.sum()))
    return np.array(out)


class GoldTracker:
    """Builds the TrainerCallback (callback()) and writes the points (see the module docstring). policy: the
    tokenizer and chat flag of the policy being trained (its model is read off the trainer at each point); golds:
    --gold specs of rewardsmith.rollouts.gold (a reward model folder is the learned gold); score_with_model: the one
    inference path (jobs.bon.ModelScores) for learned golds; proxy: the proxy's rewards of (prompt, response)
    items."""

    def __init__(
        self,
        out: str | Path,
        prompts: Sequence[BonPrompt],
        policy: Policy,
        golds: Sequence[str],
        score_with_model: ModelScorer,
        proxy: ProxyScorer,
        settings: TrackerSettings | None = None,
        reference: Any = None,
        open_append: Callable[[str], Any] | None = None,
    ):
        self.out = Path(out)
        self.prompts = list(prompts)
        self.policy = policy
        self.golds = [(spec, resolve_gold(spec)) for spec in golds]
        self.context = GoldContext(score_with_model)
        self.proxy = proxy
        self.settings = settings or TrackerSettings()
        self.reference: Any = reference
        self.points: list[dict[str, Any]] = []
        # How points are appended (a run folder's open_append: never through a link); default: plain files in out.
        self.open_append = open_append or (lambda name: (self.out / name).open("a", encoding="utf-8"))

    def begin(self, model: Any) -> None:
        """Keeps the reference policy: the one given (a resumed run's start policy, loaded again), else a frozen copy
        of the policy as training begins (a PEFT model keeps its base, read with adapters disabled).

        The copy loses every forward patched onto a module instance: TRL's GRPOTrainer replaces the policy's
        forward with a closure over the original model's forward, and a deep copy would keep calling it, so the
        "reference" would answer with the trained policy's logits and every KL would read 0."""
        if self.reference is None and not hasattr(model, "disable_adapter"):
            self.reference = copy.deepcopy(model).eval()
            for module in self.reference.modules():
                if "forward" in vars(module):
                    del module.forward
            for p in self.reference.parameters():
                p.requires_grad_(False)

    def _reference_logprobs(self, model: Any, prompt_ids: list[int], tokens: Sequence[list[int]]) -> np.ndarray:
        if self.reference is not None:
            return sequence_logprobs(self.reference, prompt_ids, tokens)
        with model.disable_adapter():
            return sequence_logprobs(model, prompt_ids, tokens)

    def point(self, model: Any, step: int) -> dict[str, Any]:
        """Samples, scores and the KL estimate at this step; appended to points.jsonl and returned."""
        s = self.settings
        was_training = model.training
        model.eval()
        policy = Policy(model, self.policy.tokenizer, self.policy.source, self.policy.chat)
        responses: list[list[str]] = []
        kl, lengths, cut = [], [], []
        for prompt in self.prompts:
            done = sample_prompt(
                policy, prompt, s.samples, seed=s.seed + step, temperature=1.0, top_p=1.0,
                max_new_tokens=s.max_new_tokens, batch_size=s.samples,
            )  # fmt: skip
            responses.append([c.text for c in done])
            ids = policy.prompt_ids(prompt)
            tokens = [list(c.ids) for c in done]
            kl.append(
                float(np.mean(sequence_logprobs(model, ids, tokens) - self._reference_logprobs(model, ids, tokens)))
            )
            lengths.append(float(np.mean([c.tokens for c in done])))
            cut.append(float(np.mean([c.cut for c in done])))
        if was_training:
            model.train()
        items = [(p.turns, r) for p, rs in zip(self.prompts, responses, strict=True) for r in rs]
        proxy = np.asarray(self.proxy(items), dtype=np.float64).reshape(len(self.prompts), s.samples)
        record: dict[str, Any] = {
            "step": step,
            "kl": mean_interval(np.array(kl), s.n_boot, s.seed).to_dict(),
            "proxy": mean_interval(_row_means(proxy), s.n_boot, s.seed).to_dict(),
            "golds": {},
            "length": float(np.mean(lengths)),
            "cut": float(np.mean(cut)),
            "prompts": len(self.prompts),
            "samples": s.samples,
        }
        per_prompt: dict[str, Any] = {
            "ids": [p.id for p in self.prompts],
            "kl": kl,
            "proxy": _finite_list(_row_means(proxy)),
            "golds": {},
        }
        for spec, gold in self.golds:
            values = _row_means(gold.score(spec, self.prompts, responses, self.context))
            record["golds"][spec] = mean_interval(values, s.n_boot, s.seed).to_dict()
            per_prompt["golds"][spec] = _finite_list(values)
        record["per_prompt"] = per_prompt  # in the order of the prompts: arms on the same prompts pair on them
        self.points.append(record)
        self.out.mkdir(parents=True, exist_ok=True)
        with self.open_append(SAMPLES_FILE) as handle:
            for prompt, texts in zip(self.prompts, responses, strict=True):
                handle.write(json.dumps({"step": step, "prompt_id": prompt.id, "responses": texts}) + "\n")
        with self.open_append(POINTS_FILE) as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
        return record

    def callback(self) -> Any:
        """A transformers TrainerCallback: a point before the first step, every `every` steps, and at the end. A run
        resumed at step k makes the point of step k only when one is due there (k a multiple of `every`)."""
        from transformers import TrainerCallback

        tracker = self

        class _Callback(TrainerCallback):
            def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
                tracker.begin(model)
                every = tracker.settings.every
                if state.global_step == 0 or (every and state.global_step % every == 0):
                    tracker.point(model, state.global_step)

            def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
                every = tracker.settings.every
                if every and state.global_step % every == 0 and state.global_step < state.max_steps:
                    tracker.point(model, state.global_step)

            def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
                tracker.point(model, state.global_step)

        return _Callback()
