"""Cuts the demo's data sample (src/rewardsmith/resources/sample/) from the shared data directory.

The sample is a miniature data directory with the layout the adapters read, holding only MIT-licensed
sources, each with its upstream licence and a SOURCE.md:
- hh-rlhf/harmless-base/test.jsonl.gz: 1,500 of 2,312 pairs; hh-rlhf/helpful-base/test.jsonl.gz: 900 of 2,354
  (a stable sample: the rows whose sha1(chosen) sorts first; upstream bytes of each row kept);
- moralchoice/moralchoice_low_ambiguity.csv: the whole file (687 scenarios);
- pluriharms/annotations.csv and prompts.csv: the whole files (100 raters x 150 prompts).

    .venv/bin/python tools/make_demo_sample.py --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import shutil
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "rewardsmith" / "resources" / "sample"
HH = {"harmless-base": 1500, "helpful-base": 900}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args()
    src = args.data_dir
    for subset, n in HH.items():
        lines = gzip.decompress((src / "hh-rlhf" / subset / "test.jsonl.gz").read_bytes()).decode().splitlines()
        keep = sorted(sorted(range(len(lines)), key=lambda i: hashlib.sha1(lines[i].encode()).hexdigest())[:n])
        target = OUT / "hh-rlhf" / subset / "test.jsonl.gz"
        target.parent.mkdir(parents=True, exist_ok=True)
        with gzip.GzipFile(target, "wb", compresslevel=9, mtime=0) as fh:
            fh.write("".join(lines[i] + "\n" for i in keep).encode())
    shutil.copy(src / "hh-rlhf" / "LICENSE.upstream", OUT / "hh-rlhf" / "LICENSE")
    for folder, files in {
        "moralchoice": ["moralchoice_low_ambiguity.csv"],
        "pluriharms": ["annotations.csv", "prompts.csv"],
    }.items():
        (OUT / folder).mkdir(parents=True, exist_ok=True)
        for name in files:
            shutil.copy(src / folder / name, OUT / folder / name)
        shutil.copy(src / folder / "LICENSE.upstream", OUT / folder / "LICENSE")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
