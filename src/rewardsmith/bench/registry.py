"""The benchmark suites, found explicitly: every module of rewardsmith.bench.suites is imported when asked for and
its module-level `SUITE` read. Nothing registers itself on import, and adding a suite is adding one module."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence

from rewardsmith.bench.suite import Suite
from rewardsmith.errors import UnknownNameError

SUITES_PACKAGE = "rewardsmith.bench.suites"


def discover_suites() -> dict[str, Suite]:
    """Suite name -> Suite for every module of rewardsmith.bench.suites, in report order (Suite.order, then name).

    Raises TypeError for a module without a `SUITE` of type Suite and ValueError for two suites of one name (both
    are bugs in the package, not user errors).
    """
    package = importlib.import_module(SUITES_PACKAGE)
    found: dict[str, Suite] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{SUITES_PACKAGE}.{info.name}")
        suite = getattr(module, "SUITE", None)
        if not isinstance(suite, Suite):
            raise TypeError(f"{module.__name__} has no module-level SUITE of type Suite")
        if suite.name in found:
            raise ValueError(f"suite {suite.name!r} defined twice ({module.__name__})")
        found[suite.name] = suite
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
