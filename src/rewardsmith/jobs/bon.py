"""`rewardsmith bon`: does a reward model help a policy? Best-of-n of a policy's own samples, chosen by one or more
proxy reward models, judged by a gold the proxies never saw.

    run_bon(BonConfig(policy="smollm2", prompts="ifeval/hh-rlhf/helpful-base", proxies=["runs/helpful/model"],
                      golds=["ifeval"]), "runs/bon")

Steps, each resumable in the run folder:
1. prompts (rollouts.prompts; written to prompts.jsonl), then samples: the policy samples N completions per prompt
   (rollouts.policy, seeded per prompt and index), appended to samples.jsonl as each prompt finishes, so a killed run
   resumes at the first prompt missing; or --samples FILE, completions made elsewhere;
2. each proxy and each gold scores every distinct (prompt, response) once, through the one inference path
   (rewardsmith.inference) for reward models; each scorer's values are saved as it finishes (scores/), and reused on a
   rerun only for the same model files and texts;
3. the estimates (bon.estimate: gold@n, proxy@n, length@n with CIs over prompts, over-optimisation verdicts, rank
   correlations, paired differences), metrics.json, report.md / report.html / plots/.
A proxy is a model folder or hub id, `MODEL#demos=FILE` for an in-context model steered by demonstrations. A gold
that is also a proxy is refused.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.bon.config import BonConfig
from rewardsmith.bon.estimate import best_of_n_estimates
from rewardsmith.bon.metrics import bon_metrics
from rewardsmith.data.schema import Turn
from rewardsmith.errors import ConfigError, DataError, NonFiniteReward
from rewardsmith.inference import InferenceOptions, ModelScores, texts_digest
from rewardsmith.io.digests import file_digest
from rewardsmith.io.environment import environment_info
from rewardsmith.io.jsonsafe import jsonl_lines
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.jobs.common import (
    JobResult,
    model_labels,
    open_run,
    slug,
    written_line,
)
from rewardsmith.models.identity import model_fingerprint, shared_weights
from rewardsmith.rollouts.gold import LEARNED, GoldContext, check_prompts_for, resolve_gold
from rewardsmith.rollouts.prompt import BonPrompt
from rewardsmith.rollouts.prompts import load_prompts, prompts_jsonl, read_prompt_record
from rewardsmith.rollouts.sampling import (
    SAMPLES_FILE,
    SAMPLING_FILE,
    kill_after,
    read_samples_file,
    sample_into,
)

COMMAND = "bon"
PROMPTS_FILE = "prompts.jsonl"
SCORES_DIR = "scores"
OUTPUTS = (
    "metrics.json",
    "report.md",
    "report.html",
    "plots",
    PROMPTS_FILE,
    SAMPLES_FILE,
    SAMPLING_FILE,
    SCORES_DIR,
)
DEMOS_MARK = "#demos="
# A real SIGKILL after this many scorers are saved (tests of resume; the sampling's: rollouts.sampling).
KILL_AFTER_SCORER_ENV = "REWARDSMITH_FAULT_KILL_AFTER_SCORER"
# Keys a rerun may change: proxies and golds are scored and saved one by one, and the rest only summarises.
VOLATILE = ("proxies", "golds", "n_boot")


@dataclass(frozen=True)
class Proxy:
    """A proxy reward model: its label, the model source and, for an in-context model, its demonstrations file."""

    label: str
    source: str
    demos: str | None


def parse_proxies(specs: Sequence[str]) -> list[Proxy]:
    """`MODEL` or `MODEL#demos=FILE` per --proxy; labels as the bench names models, "+demos" marking steering."""
    parts = [spec.split(DEMOS_MARK, 1) if DEMOS_MARK in spec else [spec, None] for spec in specs]
    if len(set(specs)) != len(specs):
        raise ConfigError(f"--proxy {next(s for s in specs if specs.count(s) > 1)} given twice")
    labels = model_labels([str(p[0]) for p in parts]) if len({str(p[0]) for p in parts}) == len(parts) else None
    out = []
    for k, (source, demos) in enumerate(parts):
        base = labels[k] if labels is not None else model_labels([str(source)])[0]
        label = base + (f"+demos:{Path(str(demos)).stem}" if demos else "")
        out.append(Proxy(label, str(source), str(demos) if demos else None))
    return out


def check_config(cfg: BonConfig) -> None:
    """One-line ConfigErrors for settings that cannot run (before anything is loaded or written)."""
    if (cfg.policy is None) == (cfg.samples is None):
        raise ConfigError("give exactly one of --policy (sample here) and --samples (completions made elsewhere)")
    if cfg.policy is not None and not cfg.prompts:
        raise ConfigError("--policy needs --prompts (what the policy answers)")
    if cfg.samples is not None and cfg.prompts:
        raise ConfigError("--samples holds its prompts: leave out --prompts")
    if not cfg.proxies:
        raise ConfigError("give at least one --proxy (a reward model that chooses the best of n)")
    if not cfg.golds:
        raise ConfigError("give at least one --gold (ifeval | math | a reward model the proxies are not)")
    proxies = parse_proxies(cfg.proxies)
    if len(set(cfg.golds)) != len(cfg.golds):
        raise ConfigError(f"--gold {next(g for g in cfg.golds if cfg.golds.count(g) > 1)} given twice")
    for gold in cfg.golds:
        if resolve_gold(gold).name != LEARNED:
            continue
        for proxy in proxies:
            # By the weights' content: a copy of the proxy under another name, or an ensemble holding it (or
            # held by it), is the proxy judging itself.
            if shared_weights(gold, proxy.source):
                raise ConfigError(
                    f"--gold {gold} and --proxy {proxy.source} hold the same weights (the same model, a copy of it, "
                    "or an ensemble with it as a member): a proxy cannot be its own gold"
                )


# ----------------------------------------------------------------------------------------------------- samples


def read_prompts(cfg: BonConfig) -> tuple[list[BonPrompt], list[list[str]] | None, str]:
    """The prompts (and, for --samples, their n responses each) and where they came from: read and checked before
    the run folder is written, so a rerun after fixing bad input is not refused."""
    if cfg.samples is not None:
        prompts, responses = read_samples_file(Path(cfg.samples), cfg.n)
        return prompts, responses, str(cfg.samples)
    assert cfg.prompts is not None
    return load_prompts(cfg.prompts, cfg.data_dir, cfg.prompts_limit, cfg.seed), None, cfg.prompts


def prompts_and_samples(
    cfg: BonConfig, folder: RunFolder, prompts: list[BonPrompt], responses: list[list[str]] | None, progress: bool
) -> tuple[list[BonPrompt], list[list[str]], dict[str, Any]]:
    """The prompts and their n responses each: those of --samples, or sampled by the policy (a resumed run answers
    the prompts its folder holds)."""
    if responses is not None:
        return prompts, responses, {"source": str(cfg.samples)}
    saved = folder.read_text(PROMPTS_FILE)  # an earlier run of this folder: a resume answers its prompts
    if saved is not None:
        path = folder.path / PROMPTS_FILE
        prompts = [read_prompt_record(json.loads(line), path, k + 1) for k, line in enumerate(jsonl_lines(saved))]
    else:
        folder.write_text(PROMPTS_FILE, prompts_jsonl(prompts))
    responses, facts = sample_into(cfg, folder, prompts, progress)
    return prompts, responses, facts


# ----------------------------------------------------------------------------------------------------- scoring


def _distinct(
    prompts: Sequence[BonPrompt], responses: Sequence[Sequence[str]]
) -> tuple[list[tuple[tuple[Turn, ...], str]], np.ndarray]:
    """The distinct (prompt, response) texts and, per sample (P, N), the index of its text."""
    index: dict[tuple[str, str], int] = {}
    texts: list[tuple[tuple[Turn, ...], str]] = []
    where = np.zeros((len(prompts), len(responses[0])), dtype=np.int64)
    for p, (prompt, answers) in enumerate(zip(prompts, responses, strict=True)):
        for k, answer in enumerate(answers):
            key = (prompt.id, answer)
            if key not in index:
                index[key] = len(texts)
                texts.append((prompt.turns, answer))
            where[p, k] = index[key]
    return texts, where


def _saved_scores(folder: RunFolder, name: str, identity: dict[str, Any]) -> np.ndarray | None:
    try:
        text = folder.read_text(f"{SCORES_DIR}/{name}")
        saved = json.loads(text) if text is not None else None
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("identity") != identity:
        return None
    values = np.array([np.nan if v is None else v for v in saved["values"]], dtype=np.float64)
    return values.reshape(identity["shape"])


def scored(
    folder: RunFolder, kind: str, label: str, identity: dict[str, Any], compute: Any, done: list[int]
) -> np.ndarray:
    """A scorer's values (P, N): saved ones when everything that made them is the same (`identity`: the model's
    content, the texts, the scoring options, and what the prompts carry for a gold), else computed and saved."""
    name = f"{kind}-{slug(label)}.json"
    saved = _saved_scores(folder, name, identity)
    if saved is not None:
        return saved
    values = np.asarray(compute(), dtype=np.float64)
    folder.write_json(
        f"{SCORES_DIR}/{name}",
        {
            "identity": identity,
            "shape": list(values.shape),
            "values": [None if not np.isfinite(v) else float(v) for v in values.ravel()],
        },
    )
    done[0] += 1
    kill_after(KILL_AFTER_SCORER_ENV, done[0])
    return values.reshape(identity["shape"])


def _demos_digest(proxy: Proxy) -> str:
    """The content digest of an in-context proxy's demonstrations file (read and checked now, before any run)."""
    from rewardsmith.icrm.scoring import read_demos

    assert proxy.demos is not None
    read_demos(proxy.demos)
    return file_digest(proxy.demos)


def _needs_digest(prompts: Sequence[BonPrompt], needs: str | None) -> str | None:
    """A digest of what a gold reads off each prompt (its `needs` field), so an edited instruction or answer is
    scored again; None for a gold that reads nothing."""
    if needs is None:
        return None
    values = [[p.id, p.meta.get(needs)] for p in prompts]
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------------------------------- the job


def run_bon(
    cfg: BonConfig,
    out: str | Path,
    *,
    options: InferenceOptions | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> JobResult:
    """Runs (or resumes) best-of-n into the run folder `out` (see the module docstring)."""
    from rewardsmith.report.bon import bon_report, summary_rows

    check_config(cfg)
    options = options or InferenceOptions()
    proxies = parse_proxies(cfg.proxies)
    golds = [(spec, resolve_gold(spec)) for spec in cfg.golds]
    demos_digests = {p.demos: _demos_digest(p) for p in proxies if p.demos is not None}
    # Everything a user gives is read and checked before the run folder is written (a corrected rerun is then not
    # refused), and a gold that cannot score these prompts is caught before any sampling.
    prompts, given, source = read_prompts(cfg)
    for spec, gold in golds:
        check_prompts_for(gold, spec, prompts, source)
    scoring = options.key()
    started = time.perf_counter()
    with open_run(out, COMMAND, cfg, overwrite, extra_volatile=VOLATILE) as folder:
        prompts, responses, sampling = prompts_and_samples(cfg, folder, prompts, given, progress)
        texts, where = _distinct(prompts, responses)
        digest = texts_digest(texts)
        shape = [len(prompts), cfg.n]
        models = ModelScores(options, progress)
        done = [0]

        def model_values(source_: str, demos: str | None = None) -> Any:
            def compute() -> np.ndarray:
                try:
                    return models(source_, texts, demos)[where]
                except NonFiniteReward as bad:  # the prompt and sample, not a text index
                    p, k = (int(x[0]) for x in np.nonzero(where == bad.position))
                    raise DataError(
                        f"{source_} gives prompt {prompts[p].id!r}, sample {k} a {bad.what} of {bad.value}, not a "
                        "finite number"
                    ) from None

            return compute

        proxy_scores = {}
        for proxy in proxies:
            identity = {
                "source": proxy.source,
                "demos": proxy.demos,
                "demos_digest": demos_digests[proxy.demos] if proxy.demos is not None else None,
                "fingerprint": model_fingerprint(proxy.source),
                "texts": digest,
                "shape": shape,
                "scoring": scoring,
            }
            proxy_scores[proxy.label] = scored(
                folder, "proxy", proxy.label, identity, model_values(proxy.source, proxy.demos), done
            )
        context = GoldContext(lambda s, t: models(s, t))
        gold_scores = {}
        for spec, gold in golds:
            label = gold.name if gold.name == spec else model_labels([spec])[0]
            learned = gold.name == LEARNED
            identity = {
                "gold": gold.name,
                "spec": spec,
                "fingerprint": model_fingerprint(spec) if learned else None,
                "texts": digest,
                "shape": shape,
                "scoring": scoring if learned else None,
                # what a checker reads off each prompt (its instructions, its reference answer)
                "needs": _needs_digest(prompts, gold.needs),
            }
            values = scored(
                folder,
                "gold",
                label,
                identity,
                model_values(spec) if learned else (lambda g=gold, s=spec: g.score(s, prompts, responses, context)),
                done,
            )
            if not np.isfinite(values).any():
                raise DataError(
                    f"--gold {spec} scored none of the {values.size} samples of {source}: "
                    + (f"no sample's {gold.needs} could be checked" if gold.needs else "every value was missing")
                )
            gold_scores[label] = values
        lengths = np.array([[len(r) for r in answers] for answers in responses], dtype=np.float64)
        estimates = best_of_n_estimates(
            [p.id for p in prompts], proxy_scores, gold_scores, lengths, cfg.n_boot, cfg.seed
        )
        metrics = bon_metrics(estimates)
        metrics.update(
            {
                "command": COMMAND,
                "prompts_source": source,
                "proxies": [{"label": p.label, "source": p.source, "demos": p.demos} for p in proxies],
                "gold_specs": {label: spec for label, (spec, _) in zip(gold_scores, golds, strict=True)},
                "gold_titles": {label: g.title for label, (_, g) in zip(gold_scores, golds, strict=True)},
                "sampling": {
                    **sampling,
                    "temperature": cfg.temperature,
                    "top_p": cfg.top_p,
                    "max_new_tokens": cfg.max_new_tokens,
                    "seed": cfg.seed,
                },
                "texts": len(texts),
                "seconds": {"total": round(time.perf_counter() - started, 1), "scoring": round(models.seconds, 1)},
                "environment": environment_info(),
            }
        )
        folder.write_json("metrics.json", metrics)
        written = bon_report(metrics, folder)
        folder.mark_complete()
    title = f"best-of-{cfg.n}: {len(prompts)} prompts, {len(proxies)} proxies, {len(golds)} golds"
    summary = [
        f"read {source}: {len(prompts)} prompts, {cfg.n} responses each ({len(texts)} distinct texts)",
        written_line(folder.path, [*written, *OUTPUTS]),
    ]
    if sampling.get("cut"):
        summary.insert(1, f"cut at --max-new-tokens {cfg.max_new_tokens}: {sampling['cut']} of the samples drawn here")
    for label, values in gold_scores.items():
        unscored = int(np.isnan(values).sum())
        if unscored:
            summary.insert(
                1, f"gold {label}: {unscored} of {values.size} samples could not be scored; left out of its estimates"
            )
    return JobResult(folder.path, title, metrics, summary_rows(metrics), summary)
