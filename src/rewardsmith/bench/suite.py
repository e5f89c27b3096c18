"""What a benchmark suite is: a loader from its release's layout to rows, and a function from the rows' rewards to
its measures. Each suite is one module of rewardsmith.bench.suites holding a module-level `SUITE`; the registry
(rewardsmith.bench.registry) finds them.

A suite's `measure` is called twice by the runner with the same rows: once with the model's rewards and once with
the responses' lengths as rewards, so every measure also reports what "the longer response wins" scores under
its own definition (the length rule).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rewardsmith.bench.measures import Composite, Units
from rewardsmith.bench.schema import Missing, SuiteData

FloatArray = NDArray[np.float64]
# One (K_i,) reward array per row of the suite, aligned with SuiteData.rows and each row's responses.
RowRewards = Sequence[FloatArray]


@dataclass(frozen=True)
class LoadRequest:
    """What the caller asks of a loader.

    data_dir: the data directory holding each release folder; limit: at most this many rows per subset, in file
    order (None: all); hub: read a release that is not on disk from its hub id (needs the network).
    """

    data_dir: Path
    limit: int | None = None
    hub: bool = False


@dataclass(frozen=True)
class EvalOptions:
    """Bootstrap settings of every CI: n_boot replicates (0: no intervals), the seed, the confidence level."""

    n_boot: int = 1000
    seed: int = 0
    confidence: float = 0.95


@dataclass(frozen=True)
class PairView:
    """The pairs behind a measure, for its length-controlled accuracy: margins r_preferred - r_dispreferred (M,),
    the preferred and dispreferred responses' lengths (M,), and whether a tied margin counts as wrong (strict, as
    RewardBench and RM-Bench count it) or 1/2."""

    margins: FloatArray
    preferred_len: FloatArray
    dispreferred_len: FloatArray
    strict: bool = False


@dataclass(frozen=True)
class Measure:
    """One number a suite reports.

    subset: the row label (a subset, section, set or "overall"); metric: what is measured ("accuracy",
    "best-of-4", "hard", ...); units: its per-unit values (a base measure) or a Composite of other measures' keys;
    level: "subset", "section", "category" or "overall" (for layout); primary: shown in the suite's main table
    (secondary measures go to a subset x metric table); chance: what random rewards score (None when there is no
    simple value); unit: "%" for percentage points, "" for fractions and correlations; pairs: the pairs behind a
    pairwise measure (for the length-controlled accuracy); rows: indices of the rows whose reward-length correlation
    the measure reports (None: not reported).
    """

    subset: str
    metric: str
    units: Units | Composite
    level: str = "subset"
    primary: bool = True
    chance: float | None = None
    unit: str = "%"
    pairs: PairView | None = None
    rows: tuple[int, ...] | None = None

    @property
    def key(self) -> str:
        return measure_key(self.subset, self.metric)


def measure_key(subset: str, metric: str) -> str:
    """The key of a measure within its suite: "<subset>::<metric>"."""
    return f"{subset}::{metric}"


@dataclass
class SuiteMeasures:
    """What a suite's `measure` returns: its measures in display order, and extras (JSON-ready curves, matrices
    or components the report shows, e.g. PPE's best-of-K curves)."""

    measures: list[Measure]
    extras: dict[str, Any] = field(default_factory=dict)


Loader = Callable[[LoadRequest], SuiteData | Missing]
Measurer = Callable[[SuiteData, RowRewards, EvalOptions], SuiteMeasures]


@dataclass(frozen=True)
class Suite:
    """A benchmark suite.

    name: the name the CLI and reports use ("reward-bench"); title: its display name; order: its place in a report
    (ascending); release: where its data comes from (hub ids, layout under the data directory); source: the
    files of the official code its definitions follow (shown in docs/benchmarks.md); load: LoadRequest ->
    SuiteData, or Missing when its release is absent; measure: (rows, rewards, options) -> SuiteMeasures;
    group: the name `rewardsmith bench --suite` selects it by, as the benchmark is usually called ("rewardbench";
    suites of one benchmark share it, as PPE's two do; "" = its own name).
    """

    name: str
    title: str
    order: int
    release: str
    source: str
    load: Loader
    measure: Measurer
    group: str = ""

    @property
    def selector(self) -> str:
        """The --suite name that selects this suite (its group, else its name)."""
        return self.group or self.name
