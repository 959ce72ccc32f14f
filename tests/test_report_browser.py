"""The HTML report in a real browser: headless Chromium, with every network fetch made to fail, loads
it; the page's own check must find every image decoded and nothing fetched. A screenshot is kept as
a test artifact (also copied to $SHAPEWISE_TEST_ARTIFACTS when set).

Skipped where no chromium binary is installed (Debian: apt-get install chromium)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from shapewise.document import write_report
from shapewise.presets import get_model
from shapewise.shapes import Workload

TIMEOUT_S = 60
CHECK = re.compile(r'<p id="browser-check"[^>]*>images=(\d+) images-ok=(\d+) network=(\d+)</p>')


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium); the browser test needs one")
    return found


def _run(chromium: str, tmp: Path, page: Path, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp / f"chromium-profile-{len(list(tmp.glob('chromium-profile-*')))}"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}",
             "--host-resolver-rules=MAP * ~NOTFOUND",  # any host name fails to resolve: no fetch can succeed
             "--virtual-time-budget=5000"]  # let the load event and the page's check run before dumping
    try:
        return subprocess.run([chromium, *flags, *extra, page.resolve().as_uri()], capture_output=True, text=True,
                              timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chromium did not finish within {TIMEOUT_S} s")


def _dom(chromium: str, tmp: Path, page: Path) -> str:
    done = _run(chromium, tmp, page, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _keep(*paths: Path) -> None:
    target = os.environ.get("SHAPEWISE_TEST_ARTIFACTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for path in paths:
            shutil.copy2(path, Path(target) / path.name)


def test_report_loads_offline_with_every_image(tmp_path):
    chromium = _chromium()
    page = tmp_path / "report-gpt2-h200.html"
    write_report(get_model("gpt2"), Workload(), gpu="h200", out=page)
    images = page.read_text(encoding="utf-8").count("<img ")
    assert images == 2

    dom = _dom(chromium, tmp_path, page)
    found = CHECK.search(dom)
    assert found, "the page's check did not run: " + (re.search(r'<p id="browser-check".*?</p>', dom) or [dom[-500:]])[0]
    total, ok, network = map(int, found.groups())
    assert (total, ok, network) == (images, images, 0)
    assert "vocab 50,257 is not a multiple of 64" in dom  # the page rendered its content, not an error

    shot = tmp_path / "report-gpt2-h200.png"
    done = _run(chromium, tmp_path, page, f"--screenshot={shot}", "--window-size=1400,3000")
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.is_file() and shot.read_bytes().startswith(b"\x89PNG")
    assert shot.stat().st_size > 10_000  # a rendered page, not a blank one
    _keep(page, shot)


def test_the_check_sees_a_fetch_and_a_broken_image(tmp_path):
    """The check is no rubber stamp: a page with an image from the network reports it."""
    chromium = _chromium()
    page = tmp_path / "tampered.html"
    write_report(get_model("gpt2"), Workload(), gpu="h200", out=page, top=1)
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("<footer>", '<img alt="" src="https://cdn.example.com/x.png"><footer>', 1),
                    encoding="utf-8")
    found = CHECK.search(_dom(chromium, tmp_path, page))
    assert found
    total, ok, network = map(int, found.groups())
    assert total == 3 and ok == 2 and network >= 1
