"""Rebuilds the result tables of README.md and docs/*.md from the committed metrics files in docs/results/ and
benchmarks/results/, so every figure there can be traced to a file and the command that wrote it.

A generated block sits between `<!-- results:NAME -->` and `<!-- /results:NAME -->`; everything between the
markers is replaced. Typing into a block is pointless: `tests/unit/test_docs.py` fails when a block differs
from what this script generates.

    .venv/bin/python tools/build_docs.py                          # rewrite the blocks
    .venv/bin/python tools/build_docs.py --check                  # exit 1 when a block is stale
    .venv/bin/python tools/build_docs.py save NAME RUN_DIR --command "CMD"   # add a run's metrics as NAME

This file is plumbing only. The blocks live in tools/blocks_<area>.py, each exporting BLOCKS = {name: function
returning the block's Markdown} and optionally FAMILIES = (function(name) -> Markdown or None, ...) for names made
at run time (`shift-<run>`); every such module is imported in file-name order, and a name defined twice is an
error. The research blocks render the claim records that rewardsmith.w2s / icrm / calibrate build from the
committed metrics; no verdict is made here.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rewardsmith.report.results import save_results

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
RESULTS = ROOT / "docs" / "results"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- results:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.S)

Block = Callable[[], str]
Family = Callable[[str], str | None]


def collect(folder: Path = TOOLS) -> tuple[dict[str, Block], list[Family]]:
    """BLOCKS and FAMILIES of every `blocks_*.py` module in `folder`, imported in file-name order. SystemExit
    naming both modules when two define the same block."""
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    blocks: dict[str, Block] = {}
    owner: dict[str, str] = {}
    families: list[Family] = []
    for path in sorted(folder.glob("blocks_*.py")):
        module = importlib.import_module(path.stem)
        for name, function in getattr(module, "BLOCKS", {}).items():
            if name in blocks:
                raise SystemExit(f"results block {name!r} is defined by both {owner[name]} and {path.name}")
            blocks[name], owner[name] = function, path.name
        families += list(getattr(module, "FAMILIES", ()))
    return blocks, families


def render_block(name: str, blocks: dict[str, Block], families: Sequence[Family]) -> str:
    """The Markdown of block `name`: its BLOCKS function, else the first family that knows the name; "Not run
    yet" naming the missing metrics file; SystemExit for a name nothing defines."""
    try:
        if name in blocks:
            return blocks[name]()
        for family in families:
            text = family(name)
            if text is not None:
                return text
    except FileNotFoundError as missing:
        return f"Not run yet: no `{Path(missing.filename).relative_to(ROOT)}`."
    raise SystemExit(f"unknown results block {name!r}")


# ----------------------------------------------------------------------------------------------------


def rebuild(check: bool) -> list[str]:
    """Rewrites every block (or, with check, lists the files whose blocks are stale)."""
    stale = []
    blocks, families = collect()
    for doc in DOCS:
        if not doc.exists():
            continue
        text = doc.read_text(encoding="utf-8")

        def fill(match: re.Match[str], doc: Path = doc) -> str:
            return f"{match.group(1)}{render_block(match.group('name'), blocks, families)}\n{match.group(4)}"

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
        print(save_results(args.name, args.run_dir, args.command, RESULTS))
        return
    stale = rebuild(args.check)
    if args.check and stale:
        print("stale results blocks in: " + ", ".join(stale), file=sys.stderr)
        raise SystemExit(1)
    print("rebuilt: " + (", ".join(stale) or "nothing changed"))


if __name__ == "__main__":
    main()
