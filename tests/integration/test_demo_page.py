"""The demo's one page in a real browser: headless Chromium (the Debian `chromium` package, which .ci/run
installs) opens runs/demo/index.html and each report of a quick demo; the test checks that every page loads
without a console or page error or a failed request, that every image decodes, and that every link resolves.
Skipped, with the reason, where Chromium or Playwright is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from screenshot_demo import FLAGS, chromium_path  # the browser as the README's screenshot is taken

pytestmark = pytest.mark.slow
CHROMIUM = chromium_path()


def _check_page(browser, page_path: Path) -> dict:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"failed request: {r.url}"))
    page.goto(page_path.as_uri(), wait_until="load")
    images = page.evaluate(
        "Array.from(document.images).map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0])"
    )
    links = page.evaluate("Array.from(document.links).map(a => a.getAttribute('href'))")
    page.close()
    return {"problems": problems, "images": images, "links": links}


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian package `chromium`)")
def test_index_and_reports_render_without_errors(quick_demo: Path) -> None:
    demo = quick_demo
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        index = _check_page(browser, demo / "index.html")
        assert not index["problems"], index["problems"]
        assert len(index["images"]) >= 4 and all(ok for _, ok in index["images"]), index["images"]
        reports = [demo / href for href in index["links"]]
        assert sorted(p.relative_to(demo).as_posix() for p in reports) == [
            "calibrate/report.html",
            "shift/report.html",
            "steer/report.html",
            "train/report.html",
        ]
        for report in reports:
            assert report.is_file(), report
            seen = _check_page(browser, report)
            assert not seen["problems"], (report, seen["problems"])
            assert seen["images"] and all(ok for _, ok in seen["images"]), (report, seen["images"])
            for href in seen["links"]:
                assert "://" not in href and (report.parent / href).exists(), (report, href)
        browser.close()
