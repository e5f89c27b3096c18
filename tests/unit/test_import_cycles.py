"""No two modules of rewardsmith import each other, directly or through others: the import graph (every import,
those inside functions and under TYPE_CHECKING too, as import-linter reads them) has no circle."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest


def module_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The circles of `graph`: its strongly connected components of more than one module, each a sorted list of
    module names, the list sorted. A module is in a circle with every module that it reaches and that reaches it."""
    seen: set[str] = set()
    circles = []
    for module in sorted(graph.modules):
        if module in seen:
            continue
        circle = graph.find_upstream_modules(module) & graph.find_downstream_modules(module)
        if circle:
            members = sorted(circle | {module})
            seen.update(members)
            circles.append(members)
    return circles


def describe(graph: grimp.ImportGraph, circle: list[str]) -> str:
    """One line per module of `circle`: the modules of the circle that it imports itself."""
    members = set(circle)
    return "\n".join(
        f"  {module} -> {', '.join(sorted(graph.find_modules_directly_imported_by(module) & members))}"
        for module in circle
    )


def test_no_module_circle_in_rewardsmith() -> None:
    graph = grimp.build_graph("rewardsmith", cache_dir=None)
    circles = module_circles(graph)
    assert not circles, "modules that import each other:\n" + "\n\n".join(describe(graph, c) for c in circles)


def test_an_import_back_up_makes_a_circle() -> None:
    """The check can fail on this package: errors, imported by (nearly) everything, importing the CLI closes a loop."""
    graph = grimp.build_graph("rewardsmith", cache_dir=None)
    graph.add_import(importer="rewardsmith.errors", imported="rewardsmith.cli")
    circles = module_circles(graph)
    assert len(circles) == 1
    assert {"rewardsmith.errors", "rewardsmith.cli"} <= set(circles[0])


def test_an_import_inside_a_function_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A circle closed by an import made only when a function runs is found, and named module by module."""
    package = tmp_path / "circle_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def late():\n    from circle_probe.high import HIGH\n\n    return HIGH\n")
    (package / "high.py").write_text("from circle_probe.low import late\n\nHIGH = 1\n")
    (package / "apart.py").write_text("from circle_probe import high\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("circle_probe", cache_dir=None)
    assert module_circles(graph) == [["circle_probe.high", "circle_probe.low"]]
    assert describe(graph, ["circle_probe.high", "circle_probe.low"]).splitlines() == [
        "  circle_probe.high -> circle_probe.low",
        "  circle_probe.low -> circle_probe.high",
    ]
