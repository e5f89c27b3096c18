"""Every results block in README.md and docs/*.md is what tools/build_docs.py builds from the committed metrics
files: no figure in them is typed by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_results_blocks_match_the_committed_metrics() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_docs.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr + done.stdout


def test_every_metrics_file_is_used_and_records_its_command() -> None:
    import json

    text = "".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    for path in (ROOT / "docs" / "results").glob("*.json"):
        assert json.loads(path.read_text())["command"], path
        assert f"docs/results/{path.name}" in text, f"{path.name} is not cited by any document"


def test_committed_per_pair_predictions_are_small_and_load_without_pickles() -> None:
    import numpy as np

    files = sorted((ROOT / "docs" / "results" / "pairs").glob("*.npz"))
    sizes = [p.stat().st_size for p in files]
    assert all(s < 2 * 1024 * 1024 for s in sizes), dict(zip([p.name for p in files], sizes, strict=True))
    assert sum(sizes) < 8 * 1024 * 1024
    for path in files:
        with np.load(path, allow_pickle=False) as arrays:
            assert arrays.files, path


def _build_docs():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_docs_under_test", ROOT / "tools" / "build_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_blocks_module_is_collected_and_a_name_defined_twice_is_refused(tmp_path: Path) -> None:
    import pytest

    build_docs = _build_docs()
    (tmp_path / "blocks_qq_one.py").write_text('BLOCKS = {"qq-a": lambda: "A"}\n')
    (tmp_path / "blocks_qq_two.py").write_text(
        'BLOCKS = {"qq-b": lambda: "B"}\nFAMILIES = (lambda name: "F" if name.startswith("qq-f-") else None,)\n'
    )
    (tmp_path / "not_blocks.py").write_text('BLOCKS = {"qq-hidden": lambda: "H"}\n')
    blocks, families = build_docs.collect(tmp_path)
    assert sorted(blocks) == ["qq-a", "qq-b"]  # only blocks_*.py modules
    assert build_docs.render_block("qq-b", blocks, families) == "B"
    assert build_docs.render_block("qq-f-anything", blocks, families) == "F"
    with pytest.raises(SystemExit, match="unknown results block 'qq-none'"):
        build_docs.render_block("qq-none", blocks, families)
    (tmp_path / "blocks_qq_three.py").write_text('BLOCKS = {"qq-a": lambda: "again"}\n')
    with pytest.raises(SystemExit, match=r"'qq-a' is defined by both blocks_qq_one\.py and blocks_qq_three\.py"):
        build_docs.collect(tmp_path)


def test_the_repository_blocks_come_from_the_tools_modules() -> None:
    import importlib

    build_docs = _build_docs()
    blocks, _ = build_docs.collect()
    declared: dict[str, object] = {}
    for path in sorted((ROOT / "tools").glob("blocks_*.py")):
        declared.update(getattr(importlib.import_module(path.stem), "BLOCKS", {}))
    assert declared and blocks == declared
    assert "BLOCKS" not in vars(build_docs)  # build_docs.py defines no block of its own
