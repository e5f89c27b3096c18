"""Charts as data: what a capability asks the report layer to draw, with no plotting library in sight.

A capability (an ICRM protocol, ...) returns `Chart`s built from its metrics; rewardsmith.report draws each by its
`kind` (report/plots.py holds the drawing). Kinds:

- "lines": `series` against x with shaded CI bands; `xlabel`, `ylabel`, `xscale` ("linear", "log" or "symlog")
  and an optional dashed horizontal `reference` line;
- "accuracy_vs_n": accuracy (%) against the number of demonstrations N, the accuracy plot's own axes, symlog
  N axis and chance line at 50; only `series` and `title` are read;
- "reliability": a reliability diagram of `bins` (bin accuracy against bin confidence, counts below).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from numpy.typing import ArrayLike

# Per-point values may hold None for a missing value.
Values = ArrayLike | Sequence[float | None]
ChartKind = Literal["lines", "accuracy_vs_n", "reliability"]
CHART_KINDS: tuple[ChartKind, ...] = ("lines", "accuracy_vs_n", "reliability")


@dataclass(frozen=True)
class Series:
    """One curve: y against x with an optional CI band [low, high]. All sequences have length K."""

    label: str
    x: Values
    y: Values
    low: Values | None = None
    high: Values | None = None


@dataclass(frozen=True)
class ReliabilityBins:
    """Per-bin values of a reliability diagram: confidence, accuracy, counts (B,) each (empty bins as None / NaN),
    e.g. from `ReliabilityCurve.to_dict()`; edges: optional (B + 1,) bin edges (bins drawn as bars when given)."""

    confidence: Values
    accuracy: Values
    counts: Values
    edges: Values | None = None


@dataclass(frozen=True)
class Chart:
    """One figure of a report: drawn to plots/<file> and shown above `caption`.

    file: a bare PNG file name ("steer_vs_n.png"), never a path; series: the curves ("lines", "accuracy_vs_n");
    bins: the reliability bins ("reliability"). ValueError for an unknown kind, a file that is not a bare .png
    name, or a reliability chart without bins.
    """

    kind: ChartKind
    file: str
    title: str
    caption: str
    series: Sequence[Series] = ()
    xlabel: str = ""
    ylabel: str = ""
    xscale: str = "linear"
    reference: float | None = None
    bins: ReliabilityBins | None = None

    def __post_init__(self) -> None:
        if self.kind not in CHART_KINDS:
            raise ValueError(f"chart kind {self.kind!r} unknown; known: {', '.join(CHART_KINDS)}")
        if not self.file.endswith(".png") or "/" in self.file or "\\" in self.file or self.file.startswith("."):
            raise ValueError(f"chart file {self.file!r} must be a bare .png file name")
        if self.kind == "reliability" and self.bins is None:
            raise ValueError(f"reliability chart {self.file!r} has no bins")
