"""Load an HTML file in headless Chromium and report what a person would see break.

Used by the report's browser test. Chromium prints every console message (errors,
uncaught exceptions, warnings) to stderr with ``--enable-logging=stderr``; the report
itself writes nothing to the console, so any such line is a failure. The page's
final DOM comes from ``--dump-dom`` after a virtual-time budget long enough for
plotly to draw. A small probe script added to a copy of the page records how wide
the document is at the given window width.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

CONSOLE = re.compile(r":CONSOLE[:(]?\d*\)?\]\s*(.*)")
GRAPH_ID = re.compile(r"<div id=\"([^\"]+)\" class=\"plotly-graph-div\"")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
        "param", "source", "track", "wbr"}
PROBE = (
    "<script>window.addEventListener('load',function(){setTimeout(function(){"
    "document.body.setAttribute('data-scroll-width',"
    "String(document.documentElement.scrollWidth));},1000);});</script>"
)


def chromium() -> str:
    """The Chromium binary; skip where there is none, unless the run requires it.

    ``scripts/test.sh`` installs Chromium and sets NIGHTJAR_REQUIRE_BROWSER=1, so
    there a missing browser fails the test rather than skipping it.
    """
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("NIGHTJAR_REQUIRE_BROWSER") == "1":
        pytest.fail("chromium is required (NIGHTJAR_REQUIRE_BROWSER=1) but not installed")
    pytest.skip("chromium is not installed (scripts/test.sh installs it)")


@dataclass
class Loaded:
    dom: str
    console: list[str]  # every console message and uncaught error
    scroll_width: int | None  # document width at the window width, px
    rendered: dict[str, bool]  # plotly figure div id -> its SVG is in the DOM


class _SvgInFigures(HTMLParser):
    """For each plotly figure div (by id), whether an svg.main-svg sits inside it."""

    def __init__(self, ids: set[str]) -> None:
        super().__init__()
        self.ids = ids
        self.found = dict.fromkeys(ids, False)
        self.stack: list[str | None] = []  # figure id owning each open element, or None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        owner = next((o for o in reversed(self.stack) if o is not None), None)
        if tag == "svg" and owner is not None and "main-svg" in (a.get("class") or "").split():
            self.found[owner] = True
        if tag in VOID:
            return
        self.stack.append(a.get("id") if a.get("id") in self.ids else None)

    def handle_endtag(self, tag: str) -> None:
        if tag not in VOID and self.stack:
            self.stack.pop()


def load(page: Path, width: int = 1280, budget_ms: int = 15000, after_load: str = "") -> Loaded:
    """``after_load``: JavaScript run once the page has loaded (a person's clicks)."""
    source = page.read_text(encoding="utf-8")
    ids = set(GRAPH_ID.findall(source))
    act = (f"<script>window.addEventListener('load',function(){{{after_load}}});</script>"
           if after_load else "")
    with tempfile.TemporaryDirectory() as tmp:
        probed = Path(tmp) / "page.html"
        probed.write_text(source.replace("<head>", "<head>" + PROBE + act, 1),
                          encoding="utf-8")
        cmd = [
            chromium(), "--headless", "--no-sandbox", "--disable-gpu",
            f"--user-data-dir={tmp}/profile", "--enable-logging=stderr", "--v=0",
            f"--window-size={width},900", f"--virtual-time-budget={budget_ms}",
            "--dump-dom", probed.as_uri(),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    if done.returncode != 0:
        raise AssertionError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    console = [m.group(1) for m in map(CONSOLE.search, done.stderr.splitlines()) if m]
    width_attr = re.search(r'data-scroll-width="(\d+)"', done.stdout)
    parser = _SvgInFigures(ids)
    parser.feed(done.stdout)
    return Loaded(
        dom=done.stdout,
        console=console,
        scroll_width=int(width_attr.group(1)) if width_attr else None,
        rendered=parser.found,
    )
