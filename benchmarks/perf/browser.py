"""Headless Debian Chromium for the benchmark scripts, launched as the tests launch it (no network of its own)."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def available() -> bool:
    return Path(CHROMIUM).exists()


@contextmanager
def page(timeout_ms: int = 60_000) -> Iterator[Any]:
    """A new page in a fresh headless Chromium, closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            tab = browser.new_page()
            tab.set_default_timeout(timeout_ms)
            yield tab
        finally:
            browser.close()
