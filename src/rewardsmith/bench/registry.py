"""The benchmark suites, found explicitly by the project's one discovery function (rewardsmith.registry.discover):
every module of rewardsmith.bench.suites is imported when asked for and its module-level `SUITE` read. Nothing
registers itself on import, and adding a suite is adding one module to bench/suites/ and nothing else."""

from __future__ import annotations

from collections.abc import Sequence

from rewardsmith.bench.suite import Suite
from rewardsmith.errors import UnknownNameError
from rewardsmith.registry import discover

SUITES_PACKAGE = "rewardsmith.bench.suites"
ALL = "all"


def discover_suites() -> dict[str, Suite]:
    """Suite name -> Suite for every module of rewardsmith.bench.suites (rewardsmith.registry.discover), in report
    order (Suite.order, then name).

    Raises TypeError for a module without a `SUITE` of type Suite and ValueError for two suites of one name (both
    are bugs in the package, not user errors).
    """
    found = discover(SUITES_PACKAGE, "SUITE", Suite)
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def get_suites(names: Sequence[str] | None = None) -> list[Suite]:
    """The suites named (all, in report order, when names is None); UnknownNameError for a name not found."""
    suites = discover_suites()
    if names is None:
        return list(suites.values())
    unknown = [n for n in names if n not in suites]
    if unknown:
        raise UnknownNameError("benchmark suite", unknown[0], list(suites))
    return [suites[n] for n in names]


def suite_selectors() -> dict[str, list[str]]:
    """--suite name -> the registry names it selects, in report order: "all" (every suite), each suite's group
    ("rewardbench", "ppe", ...) and each suite's own name ("ppe-correctness")."""
    suites = discover_suites()
    selectors: dict[str, list[str]] = {ALL: list(suites)}
    for name, suite in suites.items():
        selectors.setdefault(suite.selector, []).append(name)
    for name in suites:
        selectors.setdefault(name, [name])
    return selectors


def select_suites(selected: Sequence[str] | None) -> list[str]:
    """The registry names of the suites `--suite` options select (None or empty: all), each once, in report
    order; UnknownNameError naming the groups and suites for a name that selects none."""
    selectors = suite_selectors()
    chosen: set[str] = set()
    for name in selected or (ALL,):
        if name not in selectors:
            raise UnknownNameError("benchmark suite", name, list(selectors))
        chosen.update(selectors[name])
    return [name for name in selectors[ALL] if name in chosen]
