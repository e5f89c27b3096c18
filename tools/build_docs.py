"""Rebuilds the result tables of README.md and docs/*.md from the committed metrics files in docs/results/ and
benchmarks/results/, so every figure there can be traced to a file and the command that wrote it.

A generated block sits between `<!-- results:NAME -->` and `<!-- /results:NAME -->`; everything between the
markers is replaced. Typing into a block is pointless: `tests/unit/test_docs.py` fails when a block differs
from what this script generates.

    .venv/bin/python tools/build_docs.py                          # rewrite the blocks
    .venv/bin/python tools/build_docs.py --check                  # exit 1 when a block is stale
    .venv/bin/python tools/build_docs.py save NAME RUN_DIR --command "CMD"   # add a run's metrics as NAME
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
BENCH = ROOT / "benchmarks" / "results"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- results:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)
# Bulky parts of a run's metrics.json that no document shows.
_DROP = {"reliability", "curve", "tables", "environment"}


def load(name: str) -> dict[str, Any]:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _ci(value: Any, ci: Any, decimals: int = 1) -> str:
    if value is None:
        return "n/a"
    text = f"{value:.{decimals}f}"
    if ci and None not in ci:
        text += f" [{ci[0]:.{decimals}f}, {ci[1]:.{decimals}f}]"
    return text


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _source(*names: str) -> str:
    return "Source: " + ", ".join(f"`docs/results/{n}.json`" for n in names) + "; command: " + "; ".join(
        f"`{load(n)['command']}`" for n in names) + "."


# ----------------------------------------------------------------------------------------------------
# Blocks


def block_demo() -> str:
    demo = load("demo")
    train, shift, steer, cal = (demo[k] for k in ("train", "shift", "steer", "calibrate"))
    held = train["eval"]["hh-rlhf/harmless-base (held-out)"]
    target = shift["targets"][0]
    methods = shift["methods"]
    rows = [["1. train", f"MiniLM on {train['train']['pairs']} HH-RLHF harmless pairs, {held['n']} held out",
             f"accuracy {_ci(held['accuracy'], held['accuracy_ci'])}; length rule "
             f"{held['length_rule_accuracy']:.1f}; length-controlled "
             f"{_ci(held['length_controlled_accuracy'], held['length_controlled_accuracy_ci'])}"],
            ["2. stress-test", f"teacher, naive, anchor, ceiling; ID and {target}",
             "; ".join(f"{m} {methods[m]['id_acc']:.1f} / {methods[m][f'ood_acc.{target}']:.1f}"
                       for m in ("teacher", "naive", "anchor", "ceiling") if m in methods)],
            ["3. steer", f"ICRM on step 1's encoder, {steer['check']['n_demos']} demonstrations, "
                         f"{steer['check']['pairs']} held-out pairs",
             "; ".join(f"{k} {_ci(c['accuracy'], c['accuracy_ci'])}" for k, c in steer["check"]["conditions"].items())
             + f"; BT {_ci(steer['bt']['accuracy'], steer['bt']['accuracy_ci'])}"],
            ["4. calibrate", f"PEBS on PluriHarms ({cal['data']['raters']} raters)",
             f"RMSE gain vs pooled {_ci(cal['gain_vs_pooled_pct.pebs'], cal['gain_vs_pooled_ci.pebs'], 2)}%"]]
    return (f"Measured on a fresh clone on the 2-core machine (`make demo`, {demo['seconds'] / 60:.1f} min including "
            "model loading; accuracies in %, 95% bootstrap CIs):\n\n"
            + _table(["step", "what runs", "result"], rows) + "\n\n" + _source("demo"))


def block_train() -> str:
    rows = []
    for name in ("train-harmless", "train-helpful"):
        m = load(name)
        for dataset, b in m["eval"].items():
            if not b.get("n"):
                continue
            rows.append([m["train"]["dataset"], dataset, f"{b['n']:,}", _ci(b["accuracy"], b["accuracy_ci"]),
                         f"{b['length_rule_accuracy']:.1f}",
                         _ci(b["length_controlled_accuracy"], b["length_controlled_accuracy_ci"]),
                         f"{b['prefers_longer_rate']:.1f}"])
    return (_table(["trained on", "evaluated on", "n", "accuracy", "length rule", "length-controlled",
                    "prefers longer %"], rows) + "\n\n" + _source("train-harmless", "train-helpful"))


def block_calibration() -> str:
    m = load("calibrate-pluriharms")
    names = [k.split(".", 1)[1] for k in m if k.startswith("rmse.")]
    rows = []
    for method in names:
        row = [method, f"{m[f'rmse.{method}']:.2f}",
               "0 (reference)" if method == "pooled" else
               _ci(m.get(f"gain_vs_pooled_pct.{method}"), m.get(f"gain_vs_pooled_ci.{method}"), 2)]
        for size in (25, 18):
            value = m.get(f"fit_size.{size}.gain_vs_pooled_pct.{method}")
            row.append("n/a" if value is None else f"{value:.2f}")
        rows.append(row)
    return (_table(["method", "held-out RMSE (0-100)", "gain vs pooled % [95% CI]", "gain @25 %", "gain @18 %"],
                   rows) + "\n\n" + _source("calibrate-pluriharms"))


def block_serve() -> str:
    """The table benchmarks/bench_serve.py printed and stored with its results."""
    result = json.loads((BENCH / "serve.json").read_text(encoding="utf-8"))
    return (result["table"] + f"\n\nSource: `benchmarks/results/serve.json`; command: `{result['command']}`.")


BLOCKS: dict[str, Callable[[], str]] = {"demo": block_demo, "train": block_train, "calibration": block_calibration,
                                        "serve": block_serve}


# ----------------------------------------------------------------------------------------------------


def slim(metrics: Any) -> Any:
    if isinstance(metrics, dict):
        return {k: slim(v) for k, v in metrics.items() if k not in _DROP}
    if isinstance(metrics, list):
        return [slim(v) for v in metrics]
    return metrics


def save(name: str, run_dir: Path, command: str) -> Path:
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps({"command": command, **slim(metrics)}, indent=1) + "\n", encoding="utf-8")
    return out


def rebuild(check: bool) -> list[str]:
    """Rewrites every block (or, with check, lists the files whose blocks are stale)."""
    stale = []
    for doc in DOCS:
        if not doc.exists():
            continue
        text = doc.read_text(encoding="utf-8")

        def fill(match: re.Match[str], doc: Path = doc) -> str:
            name = match.group("name")
            if name not in BLOCKS:
                raise SystemExit(f"{doc}: unknown results block {name!r}")
            return f"{match.group(1)}{BLOCKS[name]()}\n{match.group(4)}"

        new = BLOCK.sub(fill, text)
        if new != text:
            stale.append(str(doc.relative_to(ROOT)))
            if not check:
                doc.write_text(new, encoding="utf-8")
    return stale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action")
    saver = sub.add_parser("save", help="copy a run's metrics.json (slimmed) to docs/results/NAME.json")
    saver.add_argument("name")
    saver.add_argument("run_dir", type=Path)
    saver.add_argument("--command", required=True, help="the command that produced the run")
    parser.add_argument("--check", action="store_true", help="exit 1 when a block is stale")
    args = parser.parse_args()
    if args.action == "save":
        print(save(args.name, args.run_dir, args.command))
        return
    stale = rebuild(args.check)
    if args.check and stale:
        print("stale results blocks in: " + ", ".join(stale), file=sys.stderr)
        raise SystemExit(1)
    print("rebuilt: " + (", ".join(stale) or "nothing changed"))


if __name__ == "__main__":
    main()
