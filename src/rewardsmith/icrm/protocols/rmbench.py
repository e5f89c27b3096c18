"""RM-Bench easy / normal / hard accuracy as N grows, per subset and overall (each subset's own
demonstrations; a prompt's three style pairs share one draw of demonstrations)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rewardsmith.data.schema import PreferencePair
from rewardsmith.errors import DataError
from rewardsmith.evaluate.rmbench import rmbench_accuracy
from rewardsmith.icrm.episodes import Episode, PairPool, Standard, draw_demos
from rewardsmith.icrm.protocols.context import RMBENCH_SUBSETS, EvalContext, renamed

_KEYS = ("easy", "normal", "hard", "avg")


def variant_pool(pool: PairPool) -> PairPool:
    """3 pairs per RM-Bench prompt: (chosen style i, rejected style i) for i = 0, 1, 2."""
    pairs = []
    for p in pool.pairs:
        cv, rv = p.metadata["chosen_variants"], p.metadata["rejected_variants"]
        pairs += [PreferencePair(p.prompt, cv[i], rv[i], 1.0, p.domain, f"{p.pair_id}:{i}") for i in range(3)]
    return PairPool(pool.name, pairs)


def _accuracy(chosen: np.ndarray, rejected: np.ndarray, n_boot: int) -> dict[str, Any]:
    acc = rmbench_accuracy(chosen, rejected, n_boot=n_boot)
    return {**{k: acc[k] for k in _KEYS}, "avg_ci": acc["avg_ci"], "n_prompts": acc["n"]}


def rmbench(ctx: EvalContext) -> dict[str, Any]:
    n_boot = ctx.cfg.eval.n_boot
    result: dict[str, Any] = {"n_values": list(ctx.cfg.eval.n_values), "subsets": {}}
    totals: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {n: ([], []) for n in ctx.cfg.eval.n_values}
    bt_all: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
    for subset in RMBENCH_SUBSETS:
        try:
            base = ctx.test_pool(subset)
        except DataError as exc:  # a subset missing from this data directory is reported, not fatal
            result["subsets"][subset] = {"missing": str(exc)}
            continue
        target = variant_pool(base)
        demos = renamed(ctx.demo_pool(subset), target.name)
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
            rows.append({"demos": n, **_accuracy(chosen, rejected, n_boot)})
        entry: dict[str, Any] = {"prompts": len(base), "icrm": rows}
        bt = ctx.bt_scores(target)
        if bt is not None:
            bt_c, bt_r = bt[0].reshape(-1, 3), bt[1].reshape(-1, 3)
            bt_all[0].append(bt_c)
            bt_all[1].append(bt_r)
            entry["bt"] = _accuracy(bt_c, bt_r, n_boot)
        result["subsets"][subset] = entry
    result["overall"] = [{"demos": n, **_accuracy(np.concatenate(cs), np.concatenate(rs), n_boot)}
                         for n, (cs, rs) in totals.items() if cs]
    if bt_all[0]:
        result["bt_overall"] = _accuracy(np.concatenate(bt_all[0]), np.concatenate(bt_all[1]), n_boot)
    return result
