"""Take full-page screenshots of console pages in zh and en (developer tool).

Usage: python tools/screenshots.py URL USER PASSWORD OUTDIR path1 [path2 ...]
Uses Debian Chromium (/usr/bin/chromium) through Playwright; never downloads a browser.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def main(base: str, user: str, password: str, outdir: str, paths: list[str]) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        for lang, locale in (("zh", "zh-CN"), ("en", "en-US")):
            ctx = browser.new_context(locale=locale, viewport={"width": 1440, "height": 900})
            page = ctx.new_page()
            page.goto(base + "/login/")
            page.fill("input[name=username]", user)
            page.fill("input[name=password]", password)
            page.click("button[type=submit]")
            page.wait_for_load_state("networkidle")
            for path in paths:
                page.goto(base + path)
                page.wait_for_load_state("networkidle")
                name = re.sub(r"[^A-Za-z0-9]+", "_", path).strip("_") or "root"
                page.screenshot(path=str(out / f"{name}-{lang}.png"), full_page=True)
                print(out / f"{name}-{lang}.png")
            ctx.close()
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
