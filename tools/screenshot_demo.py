"""Screenshots of a demo's page and its four reports in headless Chromium (the Debian `chromium` package and
Playwright, as in tests/integration/test_demo_page.py).

    .venv/bin/python tools/screenshot_demo.py runs/demo                    # writes docs/demo/index.png
    .venv/bin/python tools/screenshot_demo.py runs/demo --reports /tmp/shots   # and each report, to look at

The README shows docs/demo/index.png; regenerate it after a fresh-clone `make demo` when the page changes.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# How Chromium is started, here and in the test of the page: no sandbox (a container), nothing from the network.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPORTS = ("train", "shift", "steer", "calibrate")


def chromium_path() -> str | None:
    """The Chromium executable on PATH (Debian's `chromium`, or `chromium-browser`); None without one."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("demo", type=Path, help="a finished demo run folder (holds index.html)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "demo" / "index.png")
    parser.add_argument("--reports", type=Path, default=None, help="also write <report>.png of each report here")
    parser.add_argument("--width", type=int, default=1280)
    args = parser.parse_args()
    chromium = chromium_path()
    if chromium is None:
        sys.exit("error: Chromium is not installed (Debian package `chromium`)")
    index = args.demo / "index.html"
    if not index.is_file():
        sys.exit(f"error: {index}: no such page; run `make demo` first")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=FLAGS)
        shots = [(index, args.out)]
        if args.reports is not None:
            shots += [(args.demo / name / "report.html", args.reports / f"{name}.png") for name in REPORTS]
        for page_path, png in shots:
            page = browser.new_page(viewport={"width": args.width, "height": 900})
            page.goto(page_path.resolve().as_uri(), wait_until="load")
            png.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(png), full_page=True)
            page.close()
            print(f"wrote {png}")
        browser.close()


if __name__ == "__main__":
    main()
