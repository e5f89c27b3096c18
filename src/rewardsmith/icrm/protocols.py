"""ICRM evaluation protocols. Each writes <out>/<protocol>/metrics.json, report.md/.html and plots/*.png.

- steerability: pku-saferlhf held-out pairs; accuracy against the flipped (and the helpful) labels as N
  grows, against a BT model of the same backbone (which cannot adapt).
- calibration: moralchoice held-out pairs; demonstrations with a fraction p flipped; ECE of mu against the
  demonstrated rate 1 - p, as N grows.
- rmbench: RM-Bench easy / normal / hard accuracy as N grows.
- pareto: should-respond (rm-bench/safety-response) and should-refuse (rm-bench/safety-refuse)
  demonstrations mixed with weight w; the (respond, refuse) accuracy points over w trace a frontier whose
  hypervolume is reported per N.
- math500: reference solution against corrupted ones (changed final answer, a wrong step), with and
  without demonstrations, against BT.

Targets are always the held-out `test` part of the training run's hash split; demonstrations come from its
`demo` part, or from demo + train where the demo part holds fewer pairs than the largest N.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rewardsmith.config import load_yaml
from rewardsmith.data.collate import PairEncoder
from rewardsmith.data.schema import PreferencePair, stable_hash
from rewardsmith.errors import ConfigError
from rewardsmith.evaluate.metrics import (
    bootstrap_mean,
    expected_calibration_error,
    hypervolume_2d,
    pairwise_accuracy,
    pairwise_correct,
    pareto_front,
    reliability_curve,
)
from rewardsmith.evaluate.rmbench import rmbench_accuracy
from rewardsmith.icrm.config import ICRMModelConfig, ICRMRunConfig
from rewardsmith.icrm.episodes import (
    Demo,
    Episode,
    PairPool,
    Standard,
    draw_demos,
    load_pools,
    target_episode,
)
from rewardsmith.icrm.features import (
    PoolEmbeddings,
    concat_episode_batch,
    concat_scores,
    embed_pool,
    pool_fingerprint,
    set_episode_tensors,
    set_scores,
    to_numpy,
)
from rewardsmith.icrm.model import BetaRewardModel, load_beta_reward_model
from rewardsmith.icrm.train import default_device
from rewardsmith.registry import Registry
from rewardsmith.train.checkpoint import atomic_write_json

PKU = "pku-saferlhf/harmless"
MORAL = "moralchoice/low"
RESPOND, REFUSE = "rm-bench/safety-response", "rm-bench/safety-refuse"
RMBENCH_SUBSETS = ("rm-bench/chat", "rm-bench/code", REFUSE, RESPOND)


@dataclass
class EvalContext:
    """A loaded ICRM (and optional BT baseline), the run's split settings and caches shared by protocols."""

    cfg: ICRMRunConfig
    model: BetaRewardModel
    tokenizer: Any
    model_cfg: ICRMModelConfig
    out_dir: Path
    bt: tuple[Any, Any] | None = None
    _pools: dict[str, dict[str, PairPool]] = field(default_factory=dict)
    _emb: dict[str, PoolEmbeddings] = field(default_factory=dict)
    _bt_scores: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def encoder(self) -> PairEncoder:
        return PairEncoder(self.tokenizer, self.model_cfg.max_length, self.model_cfg.min_prompt_tokens)

    def pools(self, source: str) -> dict[str, PairPool]:
        if source not in self._pools:
            self._pools[source] = load_pools(self.cfg.episodes, self.cfg.data_dir, [source])[source]
        return self._pools[source]

    def demo_pool(self, source: str) -> PairPool:
        """The demo part, or demo + train when the demo part is smaller than the largest N evaluated."""
        parts = self.pools(source)
        demo = parts["demo"]
        if len(demo) > max(self.cfg.eval.n_values):
            return demo
        merged = PairPool(
            f"{source}#demo+train",
            demo.pairs + parts["train"].pairs,
            {k: np.concatenate([demo.labellings[k], parts["train"].labellings[k]]) for k in demo.labellings},
        )
        return merged

    def test_pool(self, source: str) -> PairPool:
        test = self.pools(source)["test"]
        limit = self.cfg.eval.max_test_pairs
        if limit and len(test) > limit:
            test = PairPool(test.name, test.pairs[:limit], {k: v[:limit] for k, v in test.labellings.items()})
        return test

    def embeddings(self, pool: PairPool) -> PoolEmbeddings:
        key = pool_fingerprint(pool, "")
        if key not in self._emb:
            m = self.model_cfg
            settings = (
                f"{m.backbone}|{m.pooling}|{m.max_length}|{m.min_prompt_tokens}|{m.num_layers}|{m.bf16}"
            )
            self._emb[key] = embed_pool(
                self.model,
                self.encoder,
                pool,
                self.cfg.train.embed_batch_size,
                m.bf16,
                self.cfg.train.progress,
                self.out_dir / "embeddings",
                settings,
            )
        return self._emb[key]

    @torch.inference_mode()
    def score(self, episodes: Sequence[Episode], target: PairPool, demos: PairPool) -> dict[str, np.ndarray]:
        """ICRM scores of episodes whose targets index `target` and demonstrations index `demos`
        (episode standards name target.name). Returns to_numpy() arrays (B,)."""
        self.model.eval()
        parts: list[dict[str, np.ndarray]] = []
        if self.model.mode == "set":
            tables, demo_tables = (
                {target.name: self.embeddings(target)},
                {target.name: self.embeddings(demos)},
            )
            for k in range(0, len(episodes), 256):
                tensors = set_episode_tensors(episodes[k : k + 256], tables, demo_tables)
                parts.append(to_numpy(set_scores(self.model, tensors)))
        else:
            encoder = self.encoder
            for k in range(0, len(episodes), 16):
                batch, _ = concat_episode_batch(
                    episodes[k : k + 16], {target.name: target}, encoder, {target.name: demos}
                )
                parts.append(to_numpy(concat_scores(self.model, batch)))
        return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]} if parts else {}

    def bt_margins(self, pool: PairPool) -> np.ndarray | None:
        """BT margins r(chosen) - r(rejected) of the pool's stored pairs (None without a BT model)."""
        if self.bt is None:
            return None
        key = pool_fingerprint(pool, "")
        if key not in self._bt_scores:
            from rewardsmith.evaluate.scoring import score_pairs

            model, tokenizer = self.bt
            c, r = score_pairs(
                model,
                tokenizer,
                pool.pairs,
                self.model_cfg.max_length,
                self.model_cfg.min_prompt_tokens,
                bf16=self.model_cfg.bf16,
            )
            self._bt_scores[key] = c - r
        return self._bt_scores[key]

    def rng(self, *keys: object) -> np.random.Generator:
        return np.random.default_rng([self.cfg.eval.seed, int(stable_hash(repr(keys))[:8], 16)])


def _estimate(margins: np.ndarray, ctx: EvalContext) -> dict[str, Any]:
    return pairwise_accuracy(margins, n_boot=ctx.cfg.eval.n_boot).to_dict()


def _oriented(scores: dict[str, np.ndarray], labels: np.ndarray) -> np.ndarray:
    """Margins u_first - u_second turned so that positive means the labelled side wins."""
    d = scores["u_first"] - scores["u_second"]
    return np.where(labels > 0.5, d, -d)


def _episodes_for(
    ctx: EvalContext, target: PairPool, demos: PairPool, standard: Standard, n: int, rng: np.random.Generator
) -> list[Episode]:
    return [
        target_episode(target, demos, standard, i, n, rng, first_is_chosen=True, soft_label=True)
        for i in range(len(target))
    ]


def _rename(pool: PairPool, name: str) -> PairPool:
    return PairPool(name, pool.pairs, pool.labellings)


def _plots_dir(out: Path) -> Path:
    (out / "plots").mkdir(parents=True, exist_ok=True)
    return out / "plots"


# ----------------------------------------------------------------------------------------------------
# Protocols

Protocol = Callable[[EvalContext, Path], dict[str, Any]]
PROTOCOLS: Registry[Protocol] = Registry("icrm protocol")


@PROTOCOLS.register("steerability")
def steerability(ctx: EvalContext, out: Path) -> dict[str, Any]:
    """Accuracy against each standard's labels vs N on held-out pku-saferlhf pairs, ICRM vs BT."""
    from rewardsmith.report.plots import Series, plot_accuracy_vs_n

    target = ctx.test_pool(PKU)
    demos = _rename(ctx.demo_pool(PKU), target.name)
    bt = ctx.bt_margins(target)
    disagree = ~target.labellings["helpful"]
    standards = {
        "harmless": Standard(target.name, "harmless", 0.0),
        "harmless-flipped": Standard(target.name, "harmless", 1.0),
        "helpful": Standard(target.name, "helpful", 0.0),
        "helpful-flipped": Standard(target.name, "helpful", 1.0),
    }
    result: dict[str, Any] = {
        "n_values": list(ctx.cfg.eval.n_values),
        "test_pairs": len(target),
        "demo_pool": ctx.demo_pool(PKU).name,
        "labels_disagree": int(disagree.sum()),
        "standards": {},
    }
    series: list[Series] = []
    for name, std in standards.items():
        rows, rows_disagree = [], []
        for n in ctx.cfg.eval.n_values:
            eps = _episodes_for(ctx, target, demos, std, n, ctx.rng("steer", name, n))
            labels = np.array([e.label for e in eps])
            margins = _oriented(ctx.score(eps, target, demos), labels)
            rows.append({"demos": n, **_estimate(margins, ctx)})
            rows_disagree.append({"demos": n, **_estimate(margins[disagree], ctx)})
        entry: dict[str, Any] = {"icrm": rows, "icrm_labels_disagree": rows_disagree}
        if bt is not None:
            preferred = target.labellings[std.labelling] != (std.flip_rate > 0.5)
            bt_oriented = np.where(preferred, bt, -bt)
            entry["bt"] = _estimate(bt_oriented, ctx)
            entry["bt_labels_disagree"] = _estimate(bt_oriented[disagree], ctx)
        result["standards"][name] = entry
        if name in ("harmless-flipped", "helpful"):
            x = [r["demos"] for r in rows]
            series.append(
                Series(
                    f"ICRM, {name}",
                    x,
                    [r["value"] for r in rows],
                    [r["low"] for r in rows],
                    [r["high"] for r in rows],
                )
            )
            if bt is not None:
                b = entry["bt"]
                series.append(
                    Series(f"BT, {name}", x, [b["value"]] * len(x), [b["low"]] * len(x), [b["high"]] * len(x))
                )
    plot_accuracy_vs_n(
        series,
        _plots_dir(out) / "steerability_accuracy_vs_n.png",
        title="pku-saferlhf held-out: accuracy against the demonstrated standard",
    )
    return result


@PROTOCOLS.register("calibration")
def calibration(ctx: EvalContext, out: Path) -> dict[str, Any]:
    """ECE of mu against the demonstrated preference rate 1 - p vs N (moralchoice)."""
    from rewardsmith.report.plots import Series, plot_lines_with_ci, plot_reliability_diagram

    target = ctx.test_pool(MORAL)
    demos = _rename(ctx.demo_pool(MORAL), target.name)
    rates = list(ctx.cfg.eval.mixture_rates)
    rows: list[dict[str, Any]] = []
    mean_mu: dict[str, list[float]] = {}
    last_curve = None
    for n in ctx.cfg.eval.n_values:
        mus, outcomes = [], []
        per_rate = []
        for p in rates:
            eps = _episodes_for(
                ctx, target, demos, Standard(target.name, "default", p), n, ctx.rng("cal", p, n)
            )
            mu = ctx.score(eps, target, demos)["mu"]
            mus.append(mu)
            outcomes.append(np.full_like(mu, 1.0 - p))
            per_rate.append(float(mu.mean()))
        mean_mu[str(n)] = per_rate
        mu_all, y_all = np.concatenate(mus), np.concatenate(outcomes)
        ece = expected_calibration_error(mu_all, y_all, mode="probability")
        # Bootstrap over target pairs (each pair contributes one mu per rate).
        k = len(target)
        rng = np.random.default_rng(ctx.cfg.eval.seed)
        reps = []
        stacked_mu, stacked_y = np.stack(mus), np.stack(outcomes)  # (R, K)
        for _ in range(min(ctx.cfg.eval.n_boot, 300)):
            idx = rng.integers(0, k, k)
            reps.append(
                expected_calibration_error(
                    stacked_mu[:, idx].ravel(), stacked_y[:, idx].ravel(), mode="probability"
                )
            )
        low, high = np.quantile(reps, [0.025, 0.975]) if reps else (np.nan, np.nan)
        rows.append(
            {
                "demos": n,
                "ece": float(ece),
                "ece_low": float(low),
                "ece_high": float(high),
                "mean_abs_error": float(np.mean(np.abs(mu_all - y_all))),
            }
        )
        last_curve = reliability_curve(mu_all, y_all, mode="probability")
    result: dict[str, Any] = {
        "n_values": list(ctx.cfg.eval.n_values),
        "test_pairs": len(target),
        "flip_rates": rates,
        "ece": rows,
        "mean_mu_by_rate": mean_mu,
    }
    bt = ctx.bt_margins(target)
    if bt is not None:
        bt_mu = 1.0 / (1.0 + np.exp(-bt))
        mu_all = np.concatenate([bt_mu for _ in rates])
        y_all = np.concatenate([np.full_like(bt_mu, 1.0 - p) for p in rates])
        result["bt_ece"] = float(expected_calibration_error(mu_all, y_all, mode="probability"))
    plots = _plots_dir(out)
    x = [r["demos"] for r in rows]
    series = [
        Series(
            "ICRM", x, [r["ece"] for r in rows], [r["ece_low"] for r in rows], [r["ece_high"] for r in rows]
        )
    ]
    if "bt_ece" in result:
        series.append(Series("BT", x, [result["bt_ece"]] * len(x)))
    plot_lines_with_ci(
        series,
        plots / "calibration_ece_vs_n.png",
        xlabel="number of demonstrations N",
        ylabel="ECE of mu vs demonstrated rate",
        title="moralchoice: calibrated steerability",
        xscale="symlog",
    )
    mu_series = [Series(f"N={n}", [1.0 - p for p in rates], mean_mu[str(n)]) for n in ctx.cfg.eval.n_values]
    plot_lines_with_ci(
        mu_series,
        plots / "calibration_mu_vs_rate.png",
        xlabel="demonstrated rate 1 - p",
        ylabel="mean mu",
        title="mean posterior preference vs demonstrated rate",
    )
    if last_curve is not None:
        plot_reliability_diagram(
            last_curve.confidence,
            last_curve.accuracy,
            last_curve.counts,
            plots / "calibration_reliability_max_n.png",
            title=f"reliability at N={ctx.cfg.eval.n_values[-1]}",
        )
    return result


def _variant_pool(pool: PairPool) -> PairPool:
    """3 pairs per RM-Bench prompt: (chosen style i, rejected style i) for i = 0, 1, 2."""
    pairs = []
    for p in pool.pairs:
        cv, rv = p.metadata["chosen_variants"], p.metadata["rejected_variants"]
        pairs += [PreferencePair(p.prompt, cv[i], rv[i], 1.0, p.domain, f"{p.pair_id}:{i}") for i in range(3)]
    return PairPool(pool.name, pairs)


@PROTOCOLS.register("rmbench")
def rmbench(ctx: EvalContext, out: Path) -> dict[str, Any]:
    """RM-Bench easy / normal / hard accuracy vs N (each subset's own demonstrations, concise style)."""
    from rewardsmith.report.plots import Series, plot_accuracy_vs_n

    result: dict[str, Any] = {"n_values": list(ctx.cfg.eval.n_values), "subsets": {}}
    totals: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {
        n: ([], []) for n in ctx.cfg.eval.n_values
    }
    bt_all: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    for subset in RMBENCH_SUBSETS:
        try:
            base = ctx.test_pool(subset)
        except Exception as exc:  # a subset missing from this data directory is reported, not fatal
            result["subsets"][subset] = {"error": str(exc)}
            continue
        target = _variant_pool(base)
        demos = _rename(ctx.demo_pool(subset), target.name)
        rows = []
        for n in ctx.cfg.eval.n_values:
            rng = ctx.rng("rmbench", subset, n)
            eps = []
            for k in range(len(base)):
                shared = draw_demos(demos, Standard(target.name), n, rng)
                eps += [Episode(Standard(target.name), 3 * k + i, True, 1.0, shared) for i in range(3)]
            s = ctx.score(eps, target, demos)
            chosen, rejected = s["u_first"].reshape(-1, 3), s["u_second"].reshape(-1, 3)
            totals[n][0].append(chosen)
            totals[n][1].append(rejected)
            acc = rmbench_accuracy(chosen, rejected, n_boot=ctx.cfg.eval.n_boot)
            rows.append({"demos": n, **{k: acc[k] for k in ("easy", "normal", "hard", "avg")}})
        entry: dict[str, Any] = {"prompts": len(base), "icrm": rows}
        if ctx.bt is not None:
            bt_c, bt_r = _bt_text_scores(ctx, target)
            bt_all[0].append(bt_c)
            bt_all[1].append(bt_r)
            acc = rmbench_accuracy(bt_c, bt_r, n_boot=ctx.cfg.eval.n_boot)
            entry["bt"] = {k: acc[k] for k in ("easy", "normal", "hard", "avg")}
        result["subsets"][subset] = entry
    overall = []
    for n, (cs, rs) in totals.items():
        if cs:
            acc = rmbench_accuracy(np.concatenate(cs), np.concatenate(rs), n_boot=ctx.cfg.eval.n_boot)
            overall.append(
                {
                    "demos": n,
                    **{k: acc[k] for k in ("easy", "normal", "hard", "avg")},
                    "avg_ci": acc["avg_ci"],
                    "n_prompts": acc["n"],
                }
            )
    result["overall"] = overall
    if bt_all[0]:
        acc = rmbench_accuracy(
            np.concatenate(bt_all[0]), np.concatenate(bt_all[1]), n_boot=ctx.cfg.eval.n_boot
        )
        result["bt_overall"] = {k: acc[k] for k in ("easy", "normal", "hard", "avg", "avg_ci")}
    if overall:
        x = [r["demos"] for r in overall]
        series = [Series(f"ICRM {k}", x, [r[k] for r in overall]) for k in ("easy", "normal", "hard")]
        series.append(
            Series(
                "ICRM avg",
                x,
                [r["avg"] for r in overall],
                [r["avg_ci"][0] for r in overall],
                [r["avg_ci"][1] for r in overall],
            )
        )
        if "bt_overall" in result:
            series.append(Series("BT avg", x, [result["bt_overall"]["avg"]] * len(x)))
        plot_accuracy_vs_n(series, _plots_dir(out) / "rmbench_accuracy_vs_n.png", title="RM-Bench held-out")
    return result


def _bt_text_scores(ctx: EvalContext, pool: PairPool) -> tuple[np.ndarray, np.ndarray]:
    """BT rewards of a variant pool reshaped to (prompts, 3) for chosen and rejected."""
    from rewardsmith.evaluate.scoring import score_pairs

    assert ctx.bt is not None
    model, tokenizer = ctx.bt
    c, r = score_pairs(
        model,
        tokenizer,
        pool.pairs,
        ctx.model_cfg.max_length,
        ctx.model_cfg.min_prompt_tokens,
        bf16=ctx.model_cfg.bf16,
    )
    return c.reshape(-1, 3), r.reshape(-1, 3)


@PROTOCOLS.register("pareto")
def pareto(ctx: EvalContext, out: Path) -> dict[str, Any]:
    """Mix should-respond and should-refuse demonstrations; hypervolume of the (respond, refuse) accuracy
    frontier per N (accuracies as fractions, reference point (0, 0))."""
    from rewardsmith.report.plots import Series, plot_lines_with_ci

    respond, refuse = ctx.test_pool(RESPOND), ctx.test_pool(REFUSE)
    respond_demos, refuse_demos = ctx.demo_pool(RESPOND), ctx.demo_pool(REFUSE)
    # One combined pool: should-respond demonstrations first, then should-refuse ones.
    mixed = PairPool("pareto-mix", respond_demos.pairs + refuse_demos.pairs)
    n_respond = len(respond_demos)
    rows, points_by_n = [], {}
    for n in ctx.cfg.eval.n_values:
        points = []
        for w in ctx.cfg.eval.pareto_weights:
            k_respond = round(w * n)
            accs = []
            for name, target in (("respond", respond), ("refuse", refuse)):
                rng = ctx.rng("pareto", n, w, name)
                eps = []
                for i in range(len(target)):
                    a = rng.choice(n_respond, size=min(k_respond, n_respond), replace=False)
                    b = (
                        rng.choice(
                            len(mixed) - n_respond,
                            size=min(n - k_respond, len(mixed) - n_respond),
                            replace=False,
                        )
                        + n_respond
                    )
                    demos = tuple(Demo(int(j), True) for j in np.concatenate([a, b]))
                    eps.append(Episode(Standard("pareto-target"), i, True, 1.0, demos))
                s = ctx.score(eps, _rename(target, "pareto-target"), mixed)
                accs.append(float(pairwise_correct(s["u_first"] - s["u_second"]).mean()))
            points.append({"weight_respond": w, "respond": accs[0], "refuse": accs[1]})
        pts = np.array([[p["respond"], p["refuse"]] for p in points])
        front = pareto_front(pts)
        rows.append({"demos": n, "hypervolume": hypervolume_2d(pts), "front": front.tolist()})
        points_by_n[str(n)] = points
    result: dict[str, Any] = {
        "n_values": list(ctx.cfg.eval.n_values),
        "respond_pairs": len(respond),
        "refuse_pairs": len(refuse),
        "hypervolume": rows,
        "points": points_by_n,
    }
    if ctx.bt is not None:
        br = float(pairwise_correct(ctx.bt_margins(respond)).mean())  # type: ignore[arg-type]
        bf = float(pairwise_correct(ctx.bt_margins(refuse)).mean())  # type: ignore[arg-type]
        result["bt"] = {"respond": br, "refuse": bf, "hypervolume": hypervolume_2d([[br, bf]])}
    plots = _plots_dir(out)
    x = [r["demos"] for r in rows]
    series = [Series("ICRM", x, [r["hypervolume"] for r in rows])]
    if "bt" in result:
        series.append(Series("BT", x, [result["bt"]["hypervolume"]] * len(x)))
    plot_lines_with_ci(
        series,
        plots / "pareto_hypervolume_vs_n.png",
        xlabel="number of demonstrations N",
        ylabel="hypervolume",
        title="respond vs refuse frontier",
        xscale="symlog",
    )
    fronts = [
        Series(
            f"N={n}", [p["respond"] for p in points_by_n[str(n)]], [p["refuse"] for p in points_by_n[str(n)]]
        )
        for n in ctx.cfg.eval.n_values
    ]
    plot_lines_with_ci(
        fronts,
        plots / "pareto_points.png",
        xlabel="should-respond accuracy",
        ylabel="should-refuse accuracy",
        title="accuracy over demonstration mixes",
    )
    return result


@PROTOCOLS.register("math500")
def math500(ctx: EvalContext, out: Path) -> dict[str, Any]:
    """Reference above corrupted solutions (math-500, held-out problems) vs N, and BT."""
    from rewardsmith.report.plots import Series, plot_accuracy_vs_n

    target = ctx.test_pool("math-500")
    demos = _rename(ctx.demo_pool("math-500"), target.name)
    kinds = np.array([str(p.metadata.get("corruption", "")) for p in target.pairs])
    rows = []
    for n in ctx.cfg.eval.n_values:
        eps = _episodes_for(ctx, target, demos, Standard(target.name), n, ctx.rng("math", n))
        d = ctx.score(eps, target, demos)
        margins = d["u_first"] - d["u_second"]
        row: dict[str, Any] = {"demos": n, **_estimate(margins, ctx)}
        for kind in sorted(set(kinds)):
            row[kind] = bootstrap_mean(pairwise_correct(margins[kinds == kind]), n_boot=0).value
        rows.append(row)
    result: dict[str, Any] = {
        "n_values": list(ctx.cfg.eval.n_values),
        "test_pairs": len(target),
        "icrm": rows,
    }
    bt = ctx.bt_margins(target)
    if bt is not None:
        result["bt"] = _estimate(bt, ctx)
        for kind in sorted(set(kinds)):
            result["bt"][kind] = bootstrap_mean(pairwise_correct(bt[kinds == kind]), n_boot=0).value
    x = [r["demos"] for r in rows]
    series = [
        Series("ICRM", x, [r["value"] for r in rows], [r["low"] for r in rows], [r["high"] for r in rows])
    ]
    if bt is not None:
        b = result["bt"]
        series.append(Series("BT", x, [b["value"]] * len(x), [b["low"]] * len(x), [b["high"]] * len(x)))
    plot_accuracy_vs_n(
        series,
        _plots_dir(out) / "math500_accuracy_vs_n.png",
        title="math-500: reference above corrupted solution",
    )
    return result


# ----------------------------------------------------------------------------------------------------
# Entry point


def load_context(model_dir: str | Path, out: str | Path, cfg: ICRMRunConfig) -> EvalContext:
    """Loads the ICRM (and cfg.eval.bt_model); the split settings come from the training run's config.yaml
    beside the model folder when present, so held-out pairs are exactly the training run's."""
    model_dir = Path(model_dir)
    model, tokenizer, model_cfg = load_beta_reward_model(model_dir)
    model.to(default_device())
    run_cfg_path = model_dir.parent / "config.yaml"
    if run_cfg_path.exists():
        trained = load_yaml(ICRMRunConfig, run_cfg_path)
        cfg.episodes = trained.episodes
    bt = None
    if cfg.eval.bt_model:
        from rewardsmith.models import load_reward_model

        bt_model, bt_tok, _ = load_reward_model(cfg.eval.bt_model)
        bt_model.to(default_device())
        bt = (bt_model, bt_tok)
    return EvalContext(cfg, model, tokenizer, model_cfg, Path(out), bt)


def run_protocols(
    name: str, model_dir: str | Path, out: str | Path, cfg: ICRMRunConfig, ctx: EvalContext | None = None
) -> dict[str, Path]:
    """Runs protocol `name` (or every protocol for "all"); returns {protocol: metrics.json path}."""
    from rewardsmith.report.render import render_report

    names = PROTOCOLS.names() if name == "all" else [name]
    for n in names:
        PROTOCOLS.get(n)  # unknown names fail before any work
    if not cfg.eval.n_values or any(v < 0 for v in cfg.eval.n_values):
        raise ConfigError("eval.n_values must be a non-empty list of N >= 0")
    ctx = ctx or load_context(model_dir, out, cfg)
    written = {}
    for n in names:
        target = Path(out) / n
        target.mkdir(parents=True, exist_ok=True)
        metrics = PROTOCOLS.get(n)(ctx, target)
        metrics["protocol"] = n
        metrics["model"] = str(model_dir)
        metrics["bt_model"] = cfg.eval.bt_model
        atomic_write_json(target / "metrics.json", metrics)
        render_report(metrics, target, title=f"ICRM {n}")
        written[n] = target / "metrics.json"
    return written
