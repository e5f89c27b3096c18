"""`rewardsmith bon`: does a reward model help a policy? Best-of-n of a policy's own samples, chosen by one or more
proxy reward models, judged by a gold the proxies never saw.

    run_bon(BonConfig(policy="smollm2", prompts="ifeval/hh-rlhf/helpful-base", proxies=["runs/helpful/model"],
                      golds=["ifeval"]), "runs/bon")

Steps, each resumable in the run folder:
1. prompts (bon.prompts; written to prompts.jsonl), then samples: the policy samples N completions per prompt
   (bon.policy, seeded per prompt and index), appended to samples.jsonl as each prompt finishes, so a killed run
   resumes at the first prompt missing; or --samples FILE, completions made elsewhere;
2. each proxy and each gold scores every distinct (prompt, response) once, through the one inference path
   (jobs.inference) for reward models; each scorer's values are saved as it finishes (scores/), and reused on a
   rerun only for the same model files and texts;
3. the estimates (bon.estimate: gold@n, proxy@n, length@n with CIs over prompts, over-optimisation verdicts, rank
   correlations, paired differences), metrics.json, report.md / report.html / plots/.
A proxy is a model folder or hub id, `MODEL#demos=FILE` for an in-context model steered by demonstrations. A gold
that is also a proxy is refused.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.bon.config import BonConfig
from rewardsmith.bon.estimate import best_of_n_estimates
from rewardsmith.bon.gold import GoldContext, check_prompts_for, resolve_gold
from rewardsmith.bon.metrics import bon_metrics
from rewardsmith.bon.prompts import BonPrompt, load_prompts, prompts_jsonl, read_prompt_record
from rewardsmith.data.adapters.generic import iter_records
from rewardsmith.data.schema import Turn, sanitise_text
from rewardsmith.errors import ConfigError, DataError
from rewardsmith.io.atomic import atomic_write_text
from rewardsmith.io.environment import environment_info
from rewardsmith.io.progress import Progress
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.jobs.common import (
    JobResult,
    model_fingerprint,
    model_labels,
    open_run,
    slug,
    texts_digest,
    written_line,
)
from rewardsmith.jobs.inference import Inference, InferenceOptions

COMMAND = "bon"
PROMPTS_FILE = "prompts.jsonl"
SAMPLES_FILE = "samples.jsonl"
SCORES_DIR = "scores"
OUTPUTS = ("metrics.json", "report.md", "report.html", "plots", PROMPTS_FILE, SAMPLES_FILE, SCORES_DIR)
DEMOS_MARK = "#demos="
# A real SIGKILL after this many prompts are sampled / scorers are saved (tests of resume).
KILL_AFTER_PROMPT_ENV = "REWARDSMITH_FAULT_KILL_AFTER_PROMPT"
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


def _same_model(a: str, b: str) -> bool:
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    if pa.exists() and pb.exists():
        return pa.resolve() == pb.resolve() or (
            model_fingerprint(a) is not None and model_fingerprint(a) == model_fingerprint(b)
        )
    return a == b


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
    for gold in cfg.golds:
        for proxy in proxies:
            if _same_model(gold, proxy.source):
                raise ConfigError(f"--gold {gold} is also --proxy {proxy.source}: a proxy cannot be its own gold")
    if len(set(cfg.golds)) != len(cfg.golds):
        raise ConfigError(f"--gold {next(g for g in cfg.golds if cfg.golds.count(g) > 1)} given twice")


# ----------------------------------------------------------------------------------------------------- samples


def _kill_after(env: str, done: int) -> None:
    at = os.environ.get(env)
    if at is not None and done == int(at):
        os.kill(os.getpid(), signal.SIGKILL)


def read_samples_file(path: Path, n: int) -> tuple[list[BonPrompt], list[list[str]]]:
    """A --samples file: {prompt, responses: [text, ...]} per line (+ instructions / answer), the first n responses
    of each. DataError naming the file, row and field for a line of another shape or with fewer than n responses."""
    if not path.is_file():
        raise DataError("samples file not found", path)
    prompts: list[BonPrompt] = []
    responses: list[list[str]] = []
    for row_no, record in iter_records(path):
        prompt = read_prompt_record(record, path, row_no)
        answers = record.get("responses")
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise DataError("expected a list of response strings", path, row_no, "responses")
        if len(answers) < n:
            raise DataError(f"{len(answers)} responses, fewer than n = {n} (--n)", path, row_no, "responses")
        prompts.append(prompt)
        responses.append([sanitise_text(a)[0] for a in answers[:n]])
    if not prompts:
        raise DataError("no lines: nothing to choose from", path)
    ids = [p.id for p in prompts]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"prompt {dup!r} appears twice (one line per prompt, its responses together)", path)
    return prompts, responses


def _sampled_so_far(path: Path, prompts: Sequence[BonPrompt], n: int) -> list[list[str]]:
    """The complete lines of an earlier run's samples.jsonl that answer the first prompts in order (a line cut by a
    kill, and everything after it, is dropped)."""
    if not path.is_file():
        return []
    done: list[list[str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            break
        k = len(done)
        if k >= len(prompts) or record.get("id") != prompts[k].id or len(record.get("responses", [])) != n:
            break
        done.append([str(r) for r in record["responses"]])
    return done


def sample_policy(
    cfg: BonConfig, folder: RunFolder, prompts: Sequence[BonPrompt], progress: bool
) -> tuple[list[list[str]], dict[str, Any]]:
    """Every prompt's n completions, sampled (or read back from an earlier run of this folder) into samples.jsonl."""
    from rewardsmith.bon.policy import load_policy, sample_prompt

    assert cfg.policy is not None
    path = folder.claim(SAMPLES_FILE)
    done = _sampled_so_far(path, prompts, cfg.n)
    facts: dict[str, Any] = {"resumed_at_prompt": len(done), "sampled_tokens": 0, "cut": 0, "seconds": 0.0}
    if path.is_file():  # the lines an earlier run finished stay; a line a kill cut, and anything after it, goes
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[: len(done)]
        atomic_write_text(path, "".join(lines))
    if len(done) == len(prompts):
        return done, facts
    policy = load_policy(cfg.policy)
    facts["policy"] = policy.source
    start = time.perf_counter()
    with (
        Progress("sampling", len(prompts), enabled=progress, completed=len(done), unit="prompts") as bar,
        path.open("a", encoding="utf-8") as handle,
    ):
        for k in range(len(done), len(prompts)):
            completions = sample_prompt(
                policy,
                prompts[k],
                cfg.n,
                seed=cfg.seed,
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                max_new_tokens=cfg.max_new_tokens,
                batch_size=cfg.sample_batch_size,
            )
            texts = [c.text for c in completions]
            record = {
                "id": prompts[k].id,
                "responses": texts,
                "tokens": [c.tokens for c in completions],
                "cut": [c.cut for c in completions],
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
            done.append(texts)
            facts["sampled_tokens"] += sum(c.tokens for c in completions)
            facts["cut"] += sum(c.cut for c in completions)
            bar.update(k + 1)
            _kill_after(KILL_AFTER_PROMPT_ENV, k + 1)
    facts["seconds"] = round(time.perf_counter() - start, 1)
    return done, facts


def prompts_and_samples(
    cfg: BonConfig, folder: RunFolder, progress: bool
) -> tuple[list[BonPrompt], list[list[str]], dict[str, Any]]:
    """The prompts and their n responses each: read from --samples, or sampled by the policy."""
    if cfg.samples is not None:
        prompts, responses = read_samples_file(Path(cfg.samples), cfg.n)
        return prompts, responses, {"source": str(cfg.samples)}
    assert cfg.prompts is not None
    path = folder.path / PROMPTS_FILE
    if folder.owns(PROMPTS_FILE) and path.is_file():  # an earlier run of this folder: a resume answers its prompts
        prompts = [read_prompt_record(r, path, k) for k, r in iter_records(path)]
    else:
        prompts = load_prompts(cfg.prompts, cfg.data_dir, cfg.prompts_limit, cfg.seed)
        folder.write_text(PROMPTS_FILE, prompts_jsonl(prompts))
    responses, facts = sample_policy(cfg, folder, prompts, progress)
    return prompts, responses, facts


# ----------------------------------------------------------------------------------------------------- scoring


class ModelScores:
    """Scores texts with reward models through the one inference path, each model loaded once."""

    def __init__(self, options: InferenceOptions, progress: bool):
        self.options = options
        self.progress = progress
        self.loaded: dict[str, Inference] = {}
        self.seconds = 0.0

    def __call__(
        self, source: str, texts: Sequence[tuple[tuple[Turn, ...], str]], demos: str | None = None
    ) -> np.ndarray:
        inference = self.loaded.get(source)
        if inference is None:
            inference = self.loaded[source] = Inference.load(source, self.options)
        steering: Any = ()
        if demos is not None:
            from rewardsmith.icrm.scoring import read_demos

            if not inference.in_context:
                raise ConfigError(f"--proxy {source}{DEMOS_MARK}{demos}: a scalar reward model takes no demonstrations")
            steering = read_demos(demos).pairs
        start = time.perf_counter()
        rewards = inference.score_texts(
            list(texts), steering, progress=f"scoring with {source}" if self.progress else None
        )
        self.seconds += time.perf_counter() - start
        return np.asarray(rewards.rewards, dtype=np.float64)


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
    path = folder.path / SCORES_DIR / name
    if not folder.owns(f"{SCORES_DIR}/{name}") or not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if saved.get("identity") != identity:
        return None
    values = np.array([np.nan if v is None else v for v in saved["values"]], dtype=np.float64)
    return values.reshape(identity["shape"])


def scored(
    folder: RunFolder, kind: str, label: str, identity: dict[str, Any], compute: Any, done: list[int]
) -> np.ndarray:
    """A scorer's values (P, N): saved ones when the model files and texts are the same, else computed and saved."""
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
    _kill_after(KILL_AFTER_SCORER_ENV, done[0])
    return values.reshape(identity["shape"])


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
    started = time.perf_counter()
    with open_run(out, COMMAND, cfg, overwrite, extra_volatile=VOLATILE) as folder:
        prompts, responses, sampling = prompts_and_samples(cfg, folder, progress)
        source = cfg.samples or cfg.prompts or ""
        for spec, gold in golds:
            check_prompts_for(gold, spec, prompts, source)
        texts, where = _distinct(prompts, responses)
        digest = texts_digest(texts)
        shape = [len(prompts), cfg.n]
        models = ModelScores(options, progress)
        done = [0]

        def model_values(source_: str, demos: str | None = None) -> Any:
            return lambda: models(source_, texts, demos)[where]

        proxy_scores = {}
        for proxy in proxies:
            identity = {
                "source": proxy.source,
                "demos": proxy.demos,
                "fingerprint": model_fingerprint(proxy.source),
                "texts": digest,
                "shape": shape,
            }
            proxy_scores[proxy.label] = scored(
                folder, "proxy", proxy.label, identity, model_values(proxy.source, proxy.demos), done
            )
        context = GoldContext(lambda s, t: models(s, t))
        gold_scores = {}
        for spec, gold in golds:
            label = gold.name if gold.name == spec else model_labels([spec])[0]
            identity = {
                "gold": gold.name,
                "spec": spec,
                "fingerprint": model_fingerprint(spec),
                "texts": digest,
                "shape": shape,
            }
            gold_scores[label] = scored(
                folder, "gold", label, identity, lambda g=gold, s=spec: g.score(s, prompts, responses, context), done
            )
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
    return JobResult(folder.path, title, metrics, summary_rows(metrics), summary)
