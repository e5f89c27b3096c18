"""Declared claims and choices: the typed records every capability declares its paper's claims with (the claim in
the paper's words, the measure, the paper's figure, the bar and the file the bar is written in), and the results
built from committed metrics (estimate, CI, verdict). A record is meant to be committed before the results it
judges; each capability's claims.py says, from the git history, where it was not (and docs/ says it beside the
tables).

A verdict follows from the record, never from the reader:

- `interval`: held when the CI lies on the claimed side of the bar (above it, or below it with
  held_when="below"), not held when it lies on the other side, inconclusive when it covers the bar, "too few
  <units>" when the figure rests on fewer than rewardsmith.stats.MIN_UNITS units (where the metrics say how many)
  (rewardsmith.stats.interval_verdict);
- `tolerance`: a forecast error against the paper's tolerance, judged on its CI: held when the CI lies inside
  [-bar, bar], not held when it lies wholly outside, inconclusive when it straddles either end (or there is no
  interval: a point error says nothing of the error a practitioner would get);
- `majority`: held when more than half of the per-scope results are held, not held when at least half are not
  held, else inconclusive ("on most targets");
- `exact`: a property of the method checked by a named test, not by these runs;
- `outcome`: a categorical outcome of the runs (a verdict word, monitors that fired), held when it is the one
  claimed;
- any claim whose measure was not run gets the verdict "not run" (never "inconclusive").

Declarations live in `<capability>/claims.py` (w2s, icrm, calibrate), results are built where the metrics are,
and the doc tools only render `ClaimResult.row()`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rewardsmith.stats import HELD, INCONCLUSIVE, NOT_HELD, TOO_FEW, interval_verdict

Kind = Literal["interval", "tolerance", "majority", "exact", "outcome"]
Side = Literal["above", "below"]
NOT_RUN = "not run"
VERDICTS = (HELD, NOT_HELD, INCONCLUSIVE, NOT_RUN)  # and "too few <units>" (TOO_FEW) for an interval claim


@dataclass(frozen=True)
class Claim:
    """One claim, declared before the results that test it where the history allows (its claims.py says when).

    paper: the method's paper ("ANCHOR", "ICRM", "PEBS"); key: a stable id ("w2s.a"); statement: the claim in the
    paper's words (METHODS.md's rendering of them); measure: what is estimated and in which unit; paper_figure:
    the paper's number as text, None when the paper states the claim without one; bar: the threshold the verdict
    compares with; bar_source: the file the bar is written in; own: True for the project's own questions (not a
    claim of the paper); held_when: the side of the bar that holds the claim.
    """

    paper: str
    key: str
    statement: str
    measure: str
    bar: float = 0.0
    bar_source: str = ""
    paper_figure: str | None = None
    own: bool = False
    paper_value: float | None = None
    kind: Kind = "interval"
    held_when: Side = "above"
    bar_note: str = ""

    def __post_init__(self) -> None:
        if self.kind == "tolerance" and self.bar < 0:
            raise ValueError(f"{self.key}: a tolerance is >= 0, got {self.bar}")

    def bar_text(self) -> str:
        """The bar as a reader sees it: "> 0", "< 0.273", "|error| <= 0.2", "most targets"."""
        if self.kind == "tolerance":
            text = f"|error| <= {self.bar:g}"
        elif self.kind == "majority":
            text = "held on more than half"
        elif self.kind == "exact":
            text = "exact property"
        elif self.kind == "outcome":
            text = "the runs' outcome"
        else:
            text = f"{'>' if self.held_when == 'above' else '<'} {self.bar:g}"
        return text + (f" ({self.bar_note})" if self.bar_note else "")


@dataclass(frozen=True)
class ClaimResult:
    """A claim's result on one scope (a target, a corpus, a subset; "" when the claim has one scope).

    estimate and ci are in the measure's unit; ci is None without an interval (a tolerance check of a point,
    a count); seeds: how many seeds the estimate rests on (None when seeds do not apply); evidence: a note for
    the reader (a test name, why a claim was not run, the cause of a miss); figure: the paper's figure for this
    scope when it differs from the claim's (None: the claim's).
    """

    claim: Claim
    verdict: str
    scope: str = ""
    estimate: float | None = None
    ci: tuple[float, float] | None = None
    seeds: int | None = None
    evidence: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    figure: str | None = None

    @property
    def paper_figure(self) -> str | None:
        return self.figure if self.figure is not None else self.claim.paper_figure

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS and not self.verdict.startswith(f"{TOO_FEW} "):
            raise ValueError(f"{self.claim.key}: verdict {self.verdict!r} is not one of {VERDICTS} or {TOO_FEW!r} ...")

    def to_dict(self) -> dict[str, Any]:
        c = self.claim
        return {
            "paper": c.paper,
            "key": c.key,
            "scope": self.scope,
            "statement": c.statement,
            "measure": c.measure,
            "paper_figure": self.paper_figure,
            "bar": c.bar_text(),
            "bar_source": c.bar_source,
            "own": c.own,
            "estimate": self.estimate,
            "ci": list(self.ci) if self.ci else None,
            "seeds": self.seeds,
            "verdict": self.verdict,
            "evidence": self.evidence,
            **({"details": self.details} if self.details else {}),
        }


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def interval_result(
    claim: Claim,
    estimate: float | None,
    ci: Sequence[float | None] | None,
    *,
    scope: str = "",
    seeds: int | None = None,
    evidence: str = "",
    details: dict[str, Any] | None = None,
    n: int | None = None,
    unit: str = "units",
) -> ClaimResult:
    """An `interval` claim's result: the verdict of its CI against the bar; "not run" without an estimate;
    "too few <unit>" when n (the units the figure rests on, where the metrics record it) is below MIN_UNITS;
    "inconclusive" with an estimate but no finite interval (nothing to decide with)."""
    if claim.kind != "interval":
        raise ValueError(f"{claim.key} is a {claim.kind} claim, not an interval claim")
    if estimate is None or not _finite(estimate):
        return ClaimResult(claim, NOT_RUN, scope, seeds=seeds, evidence=evidence or "not measured by these runs")
    low, high = (ci[0], ci[1]) if ci is not None and len(ci) == 2 else (None, None)
    if not (_finite(low) and _finite(high)):
        return ClaimResult(
            claim,
            interval_verdict(None, None, n=n, unit=unit) or INCONCLUSIVE,
            scope,
            float(estimate),
            None,
            seeds,
            evidence or "no interval",
            dict(details or {}),
        )
    lo, hi = float(low), float(high)  # type: ignore[arg-type]
    # Held below the bar: the same rule on the negated interval.
    if claim.held_when == "above":
        word = interval_verdict(lo, hi, claim.bar, n=n, unit=unit)
    else:
        word = interval_verdict(-hi, -lo, -claim.bar, n=n, unit=unit)
    assert word is not None
    return ClaimResult(
        claim,
        word,
        scope,
        float(estimate),
        (lo, hi),
        seeds,
        evidence,
        dict(details or {}),
    )


def record_result(
    claim: Claim,
    entry: Mapping[str, Any] | None,
    *,
    scope: str = "",
    evidence: str = "",
    unit: str = "units",
    missing: str = "not in these runs",
) -> ClaimResult:
    """An `interval` claim's result from a committed metrics record, {"estimate", "low", "high"} or {"estimate",
    "ci"}, with the units it rests on as "n" where the record has them (interval_result); "not run" (`missing`)
    without a record."""
    if not entry:
        return not_run(claim, missing, scope=scope)
    ci = entry["ci"] if "ci" in entry else [entry.get("low"), entry.get("high")]
    return interval_result(
        claim, entry.get("estimate"), ci, scope=scope, evidence=evidence, n=entry.get("n"), unit=unit
    )


def tolerance_result(
    claim: Claim,
    error: float | None,
    ci: Sequence[float | None] | None = None,
    *,
    scope: str = "",
    evidence: str = "",
    details: dict[str, Any] | None = None,
) -> ClaimResult:
    """A `tolerance` claim's result, judged on the error's CI: held when it lies inside [-bar, bar], not held when
    it lies wholly above bar or below -bar, inconclusive when it straddles an end or no finite interval is given;
    "not run" without an error."""
    if claim.kind != "tolerance":
        raise ValueError(f"{claim.key} is a {claim.kind} claim, not a tolerance claim")
    if not _finite(error):
        return ClaimResult(claim, NOT_RUN, scope, evidence=evidence or "not measured by these runs")
    e = float(error)  # type: ignore[arg-type]
    low, high = (ci[0], ci[1]) if ci is not None and len(ci) == 2 else (None, None)
    if not (_finite(low) and _finite(high)):
        return ClaimResult(claim, INCONCLUSIVE, scope, e, None, None, evidence or "no interval", dict(details or {}))
    lo, hi = float(low), float(high)  # type: ignore[arg-type]
    if -claim.bar <= lo and hi <= claim.bar:
        word = HELD
    elif lo > claim.bar or hi < -claim.bar:
        word = NOT_HELD
    else:
        word = INCONCLUSIVE
    return ClaimResult(claim, word, scope, e, (lo, hi), None, evidence, dict(details or {}))


def majority_result(claim: Claim, parts: Sequence[ClaimResult], *, scope: str = "", evidence: str = "") -> ClaimResult:
    """A `majority` claim's result over per-scope results: estimate = the number held; held when more than half
    are held, not held when at least half are not held, inconclusive otherwise; "not run" when none was run."""
    if claim.kind != "majority":
        raise ValueError(f"{claim.key} is a {claim.kind} claim, not a majority claim")
    run = [p for p in parts if p.verdict != NOT_RUN]
    if not run:
        return ClaimResult(claim, NOT_RUN, scope, evidence=evidence or "not measured by these runs")
    held = sum(p.verdict == HELD for p in run)
    not_held = sum(p.verdict == NOT_HELD for p in run)
    word = HELD if 2 * held > len(run) else NOT_HELD if 2 * not_held >= len(run) else INCONCLUSIVE
    counts = f"held on {held} of {len(run)}, not held on {not_held}"
    return ClaimResult(
        claim,
        word,
        scope,
        float(held),
        None,
        None,
        f"{counts}; {evidence}" if evidence else counts,
        {"held": held, "not_held": not_held, "of": len(run)},
    )


def exact_result(claim: Claim, test: str) -> ClaimResult:
    """An `exact` claim: a property of the method that the named test checks (held while the test passes); the
    claim's bar_note says what "exact" is up to, where it is not exact to the last bit."""
    if claim.kind != "exact":
        raise ValueError(f"{claim.key} is a {claim.kind} claim, not an exact claim")
    exact = f"exact {claim.bar_note}" if claim.bar_note else "exact"
    return ClaimResult(claim, HELD, evidence=f"{exact}, a property of the method checked by {test}")


def not_run(claim: Claim, why: str, *, scope: str = "") -> ClaimResult:
    """A claim these runs do not test, with the reason."""
    return ClaimResult(claim, NOT_RUN, scope, evidence=why)


def point_only(
    claim: Claim, estimate: float | None, why: str, *, scope: str = "", seeds: int | None = None
) -> ClaimResult:
    """A claim whose interval the committed metrics do not hold: "not run", with the point estimate they do give
    (shown as a point, never judged) and why the interval is missing (the command that would produce it)."""
    point = float(estimate) if _finite(estimate) else None  # type: ignore[arg-type]
    return ClaimResult(claim, NOT_RUN, scope, point, None, seeds, why, {"point_only": point is not None})


@dataclass(frozen=True)
class Choice:
    """A setting chosen by data, declared with its rule (before the runs that apply it where the history allows).

    key: a stable id; what: the setting; options: the candidates; rule: how the choice is made; split: the data the
    rule reads (a validation split or a corpus that is never reported), never a reported test split; where: the
    file the rule is written in.
    """

    paper: str
    key: str
    what: str
    options: str
    rule: str
    split: str
    where: str

    def made(self, chosen: str, evidence: dict[str, Any] | None = None) -> dict[str, Any]:
        """The choice as made: JSON-ready, with the scores it was made on."""
        return {
            "key": self.key,
            "what": self.what,
            "options": self.options,
            "rule": self.rule,
            "split": self.split,
            "where": self.where,
            "chosen": chosen,
            "evidence": dict(evidence or {}),
        }


def paper_comparison(result: ClaimResult) -> str:
    """Where the paper's figure is in the measure's unit and the result has a CI: whether the figure lies inside it,
    in words ("" otherwise)."""
    value, ci = result.claim.paper_value, result.ci
    if value is None or ci is None or result.verdict == NOT_RUN:
        return ""
    where = "inside" if ci[0] <= value <= ci[1] else "outside"
    return f"the paper's {value:+g} lies {where} our CI"


def claim_row(result: ClaimResult, decimals: int = 1) -> list[str]:
    """[claim (own questions marked), scope, measure, paper's figure, ours [CI], bar, verdict (+ seeds note)]; a
    "not run" result's estimate is marked as not judged ("(point; no CI)", or "(not judged)" after its interval)."""
    c = result.claim
    ours = "-"
    if result.estimate is not None:
        ours = f"{result.estimate:.{decimals}f}"
        if result.ci is not None:
            ours += f" [{result.ci[0]:.{decimals}f}, {result.ci[1]:.{decimals}f}]"
        if result.verdict == NOT_RUN:
            # Shown, never judged: a point without its interval, or an interval of a contrast that tests nothing.
            ours += " (point; no CI)" if result.ci is None else " (not judged)"
    verdict = f"**{result.verdict}**"
    if result.seeds is not None and result.seeds < 3 and result.verdict in (HELD, NOT_HELD, INCONCLUSIVE):
        verdict += f" ({result.seeds} seed{'s' if result.seeds != 1 else ''})"
    against = paper_comparison(result)
    if against:
        verdict += f"; {against}"
    statement = ("project's own: " if c.own else "") + c.statement
    return [
        statement,
        result.scope or "-",
        c.measure,
        result.paper_figure or "none given",
        ours,
        c.bar_text(),
        verdict + (f"; {result.evidence}" if result.evidence else ""),
    ]


CLAIM_HEADER = ["claim", "scope", "measure", "paper", "ours [95% CI]", "bar (declared in claims.py)", "verdict"]
