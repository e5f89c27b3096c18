"""What one ICRM protocol module exports: `PROTOCOL = ICRMProtocol(name, run, rows, charts)`. The package's
discovery (rewardsmith.icrm.protocols) reads it; the report layer draws its charts and prints its rows knowing
nothing of the protocol, so a new protocol is one new module of this package and nothing else."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rewardsmith.evaluate.charts import Chart, Series

if TYPE_CHECKING:
    from rewardsmith.icrm.protocols.context import EvalContext

N_LABEL = "number of demonstrations N"


@dataclass(frozen=True)
class ICRMProtocol:
    """One evaluation protocol.

    name: what `icrm eval --protocol` names (and the run folder's sub-folder);
    run(ctx) -> the JSON-ready metrics dict (a `per_pair` entry, when present, goes to per_pair.json);
    rows(metrics) -> console rows of headline figures, each {"figure": ..., "N=<n>": text, ..., "BT": text}
    (the report puts the protocol's name in front);
    charts(metrics) -> the figures of its report, as data (rewardsmith.evaluate.charts), in report order.
    """

    name: str
    run: Callable[[EvalContext], dict[str, Any]]
    rows: Callable[[Mapping[str, Any]], list[dict[str, Any]]]
    charts: Callable[[Mapping[str, Any]], list[Chart]]


def ci_series(label: str, rows: list[dict[str, Any]], key: str = "estimate") -> Series:
    """A curve over N from rows [{"demos": n, key: value, "low": ..., "high": ...}] (the band where given)."""
    return Series(
        label,
        [r["demos"] for r in rows],
        [r[key] for r in rows],
        [r.get("low") for r in rows],
        [r.get("high") for r in rows],
    )


def flat_series(label: str, x: list[int], est: Mapping[str, Any]) -> Series:
    """A flat line at est["estimate"] (with its band) over every N in x: a baseline that takes no demonstrations."""
    return Series(label, x, [est["estimate"]] * len(x), [est.get("low")] * len(x), [est.get("high")] * len(x))
