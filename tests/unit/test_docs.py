"""Every results block in README.md and docs/*.md is what tools/build_docs.py builds from the committed metrics
files: no figure in them is typed by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_results_blocks_match_the_committed_metrics() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "build_docs.py"), "--check"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout


def test_every_metrics_file_is_used_and_records_its_command() -> None:
    import json

    text = "".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    for path in (ROOT / "docs" / "results").glob("*.json"):
        assert json.loads(path.read_text())["command"], path
        assert f"docs/results/{path.name}" in text, f"{path.name} is not cited by any document"
