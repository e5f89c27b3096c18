"""ICRM protocols are one module each: the package finds every module's PROTOCOL, the report draws any protocol's
charts by chart kind and prints its rows, and a protocol module dropped into the package is run and reported with
nothing else changed."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rewardsmith.icrm.protocols as protocols
import rewardsmith.report.icrm as report_icrm
from rewardsmith.errors import UnknownNameError
from rewardsmith.evaluate.charts import CHART_KINDS, Chart, ReliabilityBins, Series
from rewardsmith.icrm.config import ICRMRunConfig
from rewardsmith.icrm.protocols import PROTOCOLS, EvalContext, ICRMProtocol, load_protocols, protocol_names
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.report.icrm import protocol_report, protocol_rows

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FIVE = ["calibration", "math500", "pareto", "rmbench", "steerability"]

TOY_MODULE = """
from rewardsmith.evaluate.charts import Chart, ReliabilityBins, Series
from rewardsmith.evaluate.formatting import with_interval
from rewardsmith.icrm.protocols.base import ICRMProtocol


def run(ctx):
    n_values = list(ctx.cfg.eval.n_values)
    return {"n_values": n_values, "accuracy": [50.0 + 12.5 * i for i in range(len(n_values))],
            "trained_on_pku": ctx.is_training_source("pku-saferlhf/harmless")}


def rows(m):
    return [{"figure": "toy accuracy",
             **{f"N={n}": with_interval(a, None, 1) for n, a in zip(m["n_values"], m["accuracy"])}}]


def charts(m):
    return [
        Chart("lines", "toy_vs_n.png", title="toy", caption="Toy accuracy against N",
              series=[Series("toy", m["n_values"], m["accuracy"])], xlabel="N", ylabel="accuracy (%)"),
        Chart("reliability", "toy_reliability.png", title="toy reliability", caption="Toy reliability",
              bins=ReliabilityBins([0.6, 0.8], [0.5, 0.9], [2, 3], [0.5, 0.75, 1.0])),
    ]


PROTOCOL = ICRMProtocol("toy", run, rows, charts)
"""


@pytest.fixture
def extra_protocol_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder searched as part of the rewardsmith.icrm.protocols package (a module written there is a module
    of the package); the modules imported from it are forgotten afterwards."""
    folder = tmp_path / "protocols_extra"
    folder.mkdir()
    monkeypatch.setattr(protocols, "__path__", [*protocols.__path__, str(folder)])
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        if name.startswith("rewardsmith.icrm.protocols."):
            del sys.modules[name]


def _open(path: Path) -> RunFolder:
    return RunFolder.open(path, "icrm-eval", {"protocol": "all"})


def _metrics(protocol: str, **parts: Any) -> dict[str, Any]:
    return {"protocol": protocol, "model": "run/model", "bt_model": None, "n_values": [0, 4], **parts}


def _ci(demos: int, value: float) -> dict[str, Any]:
    return {"demos": demos, "estimate": value, "low": value - 5.0, "high": value + 5.0}


def _hand_metrics() -> dict[str, dict[str, Any]]:
    """Small metrics of each protocol in the shapes the protocols write, BT only where stated."""
    standards = {s: {"icrm": [_ci(0, 50.0), _ci(4, 60.25)]} for s in ("harmless-flipped", "helpful")}
    standards["helpful"]["bt"] = {"estimate": 55.5, "low": 50.0, "high": 61.0}
    ece = [
        {"demos": d, "ece": e, "ece_ci": [0.05, 0.2], "mean_abs_error": a, "mean_abs_error_ci": [0.1, 0.3]}
        for d, e, a in ((0, 0.1, 0.2), (4, 0.0625, 0.15))
    ]
    overall = [
        {"demos": d, "easy": 70.0, "normal": 60.0, "hard": 40.0, "avg": avg, "avg_ci": [avg - 5, avg + 5]}
        for d, avg in ((0, 56.66), (4, 61.04))
    ]
    return {
        "steerability": _metrics("steerability", standards=standards),
        "calibration": _metrics(
            "calibration",
            ece=ece,
            bt_ece=0.125,
            bt_mean_abs_error=0.2,
            flip_rates=[0.0, 1.0],
            mean_mu_by_rate={"0": [0.5, 0.5], "4": [0.8, 0.3]},
            reliability_max_n={
                "confidence": [0.6, 0.9],
                "accuracy": [0.5, 1.0],
                "counts": [3, 1],
                "edges": [0.5, 0.75, 1.0],
            },
        ),
        "rmbench": _metrics(
            "rmbench",
            overall=overall,
            bt_overall={"avg": 52.0},
            subsets={"rm-bench/chat": {"icrm": overall}, "rm-bench/code": {"icrm": []}},
        ),
        "pareto": _metrics(
            "pareto",
            hypervolume=[{"demos": 0, "hypervolume": 0.41}, {"demos": 4, "hypervolume": 0.5}],
            points={"0": [{"respond": 0.6, "refuse": 0.3}], "4": [{"respond": 0.7, "refuse": 0.4}]},
        ),
        "math500": _metrics(
            "math500", icrm=[_ci(0, 61.0), _ci(4, 64.44)], bt={"estimate": 58.0, "low": 52.0, "high": 63.0}
        ),
    }


def test_every_protocol_module_is_found_and_the_shared_modules_are_not() -> None:
    package = Path(protocols.__file__).parent
    modules = sorted(p.stem for p in package.glob("*.py") if p.stem not in ("__init__", *protocols.SHARED_MODULES))
    assert PROTOCOLS.names() == modules == FIVE
    for name in FIVE:
        protocol = PROTOCOLS.get(name)
        module = importlib.import_module(f"rewardsmith.icrm.protocols.{name}")
        assert isinstance(protocol, ICRMProtocol) and protocol is module.PROTOCOL and protocol.name == name
        assert protocol.run is getattr(module, name)  # the protocol function itself, as before
    assert protocol_names("all") == FIVE
    assert protocol_names("pareto") == ["pareto"]
    with pytest.raises(UnknownNameError, match=r"unknown icrm protocol 'nope'; known: calibration, math500, pareto"):
        protocol_names("nope")


def test_console_rows_of_each_protocol() -> None:
    m = _hand_metrics()
    rows = {name: protocol_rows(name, m[name]) for name in FIVE}
    assert rows["steerability"] == [
        {"protocol": "steerability", "figure": "accuracy, harmless-flipped", "N=0": "50.0", "N=4": "60.2", "BT": "n/a"},
        {"protocol": "steerability", "figure": "accuracy, helpful", "N=0": "50.0", "N=4": "60.2", "BT": "55.5"},
    ]
    assert rows["calibration"] == [
        {"protocol": "calibration", "figure": "ECE", "N=0": "0.100", "N=4": "0.062", "BT": "0.125"},
        {"protocol": "calibration", "figure": "mean |mu - rate|", "N=0": "0.200", "N=4": "0.150", "BT": "0.200"},
    ]
    assert rows["rmbench"] == [  # the subset without scores (code) has no row
        {"protocol": "rmbench", "figure": "RM-Bench avg", "N=0": "56.7", "N=4": "61.0", "BT": "52.0"},
        {"protocol": "rmbench", "figure": "avg, chat", "N=0": "56.7", "N=4": "61.0", "BT": "n/a"},
    ]
    assert rows["pareto"] == [{"protocol": "pareto", "figure": "hypervolume", "N=0": "0.410", "N=4": "0.500", "BT": ""}]
    assert rows["math500"] == [
        {"protocol": "math500", "figure": "accuracy", "N=0": "61.0", "N=4": "64.4", "BT": "58.0"}
    ]


def test_each_protocol_report_draws_its_charts_under_their_file_names_and_captions(tmp_path: Path) -> None:
    m = _hand_metrics()
    expected = {
        "steerability": ["steerability_accuracy_vs_n.png"],
        # no reliability slope in these metrics: no tracking figure
        "calibration": ["calibration_ece_vs_n.png", "calibration_mu_vs_rate.png", "calibration_reliability_max_n.png"],
        "rmbench": ["rmbench_accuracy_vs_n.png", "rmbench_subsets_vs_n.png"],
        "pareto": ["pareto_hypervolume_vs_n.png", "pareto_points.png"],
        "math500": ["math500_accuracy_vs_n.png"],
    }
    with _open(tmp_path / "eval") as folder:
        for name in FIVE:
            protocol_report(name, m[name], folder)
    for name in FIVE:
        charts = PROTOCOLS.get(name).charts(m[name])
        assert [c.file for c in charts] == expected[name]
        md = (tmp_path / "eval" / name / "report.md").read_text()
        assert md.startswith(f"# ICRM {name}")
        for chart in charts:
            assert f"![{chart.caption}](plots/{chart.file})" in md
            assert (tmp_path / "eval" / name / "plots" / chart.file).read_bytes().startswith(PNG_MAGIC)
        assert sorted(p.name for p in (tmp_path / "eval" / name / "plots").iterdir()) == sorted(expected[name])
    cal = PROTOCOLS.get("calibration").charts(m["calibration"])
    assert [c.kind for c in cal] == ["lines", "lines", "reliability"]
    assert cal[0].caption == "ECE and mean absolute error of mu against the demonstrated rate, 95% CIs"
    assert [s.label for s in cal[0].series] == ["ICRM ECE", "ICRM mean |mu - rate|", "BT ECE", "BT mean |mu - rate|"]
    assert cal[2].title == "reliability at N=4"
    assert PROTOCOLS.get("rmbench").charts({**m["rmbench"], "overall": []}) == []  # nothing scored, nothing drawn


def test_a_protocol_module_dropped_into_the_package_is_found_run_and_reported(
    extra_protocol_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (extra_protocol_dir / "toy.py").write_text(TOY_MODULE)
    importlib.invalidate_caches()
    found = load_protocols()  # what the package does on import
    assert found.names() == sorted([*FIVE, "toy"])
    monkeypatch.setattr(protocols, "PROTOCOLS", found)  # as a fresh import of the package would have it
    assert protocol_names("all") == sorted([*FIVE, "toy"]) and protocol_names("toy") == ["toy"]

    cfg = ICRMRunConfig()
    cfg.eval.n_values = [0, 4]
    ctx = EvalContext(cfg, None, None, None, False, None)  # type: ignore[arg-type]  # the toy reads cfg only
    metrics = protocols.PROTOCOLS.get("toy").run(ctx)
    assert metrics == {
        "n_values": [0, 4],
        "accuracy": [50.0, 62.5],
        "trained_on_pku": "pku-saferlhf/harmless" in cfg.episodes.sources,
    }
    metrics.update({"protocol": "toy", "model": "run/model", "bt_model": None})
    with _open(tmp_path / "eval") as folder:
        protocol_report("toy", metrics, folder)
        rows = protocol_rows("toy", metrics)
    assert rows == [{"protocol": "toy", "figure": "toy accuracy", "N=0": "50.0", "N=4": "62.5"}]
    md = (tmp_path / "eval" / "toy" / "report.md").read_text()
    assert "![Toy accuracy against N](plots/toy_vs_n.png)" in md
    assert "![Toy reliability](plots/toy_reliability.png)" in md
    for file in ("toy_vs_n.png", "toy_reliability.png"):
        assert (tmp_path / "eval" / "toy" / "plots" / file).read_bytes().startswith(PNG_MAGIC)


def test_a_module_of_the_package_without_a_protocol_is_a_bug(extra_protocol_dir: Path) -> None:
    (extra_protocol_dir / "helpers_misplaced.py").write_text("VALUE = 1\n")
    importlib.invalidate_caches()
    with pytest.raises(TypeError, match="helpers_misplaced has no module-level PROTOCOL of type ICRMProtocol"):
        load_protocols()


def test_the_report_module_names_no_protocol() -> None:
    source = inspect.getsource(report_icrm).lower()
    for name in PROTOCOLS.names():
        assert name.lower() not in source, name
    for word in ("pku", "moralchoice", "rm-bench", "math-500", "hypervolume", "ece", "harmless"):  # their data
        assert not re.search(rf"\b{re.escape(word)}\b", source), word


def test_a_chart_refuses_an_unknown_kind_a_path_and_missing_bins() -> None:
    series = [Series("a", [0, 1], [1.0, 2.0])]
    with pytest.raises(ValueError, match="chart kind 'bars' unknown"):
        Chart("bars", "a.png", "t", "c", series)  # type: ignore[arg-type]
    for file in ("../a.png", "sub/a.png", "a.svg", ".png"):
        with pytest.raises(ValueError, match=r"bare \.png file name"):
            Chart("lines", file, "t", "c", series)
    with pytest.raises(ValueError, match="has no bins"):
        Chart("reliability", "r.png", "t", "c")
    Chart("reliability", "r.png", "t", "c", bins=ReliabilityBins([0.6], [0.5], [1]))
    assert set(report_icrm._DRAW) == set(CHART_KINDS)  # the report draws every kind a chart may have
