"""RLVR-style check: the reference solution against corrupted ones (changed final answer, a wrong step) on
held-out math-500 problems, with and without demonstrations, against BT."""

from __future__ import annotations

from typing import Any

import numpy as np

from rewardsmith.evaluate.metrics import pairwise_correct
from rewardsmith.icrm.episodes import Standard
from rewardsmith.icrm.protocols.context import EvalContext, episodes_for, renamed


def math500(ctx: EvalContext) -> dict[str, Any]:
    target = ctx.test_pool("math-500")
    demos = renamed(ctx.demo_pool("math-500"), target.name)
    kinds = np.array([str(p.metadata.get("corruption", "")) for p in target.pairs])
    rows = []
    for n in ctx.cfg.eval.n_values:
        d = ctx.score(episodes_for(target, demos, Standard(target.name), n, ctx.rng("math", n)), target, demos)
        margins = d["u_first"] - d["u_second"]
        row: dict[str, Any] = {"demos": n, **ctx.accuracy(margins)}
        for kind in sorted(set(kinds)):
            row[kind] = float(pairwise_correct(margins[kinds == kind]).mean() * 100.0)
        rows.append(row)
    result: dict[str, Any] = {"n_values": list(ctx.cfg.eval.n_values), "test_pairs": len(target), "icrm": rows}
    bt = ctx.bt_margins(target)
    if bt is not None:
        result["bt"] = ctx.accuracy(bt)
        for kind in sorted(set(kinds)):
            result["bt"][kind] = float(pairwise_correct(bt[kinds == kind]).mean() * 100.0)
    return result
