"""The docs' screenshots (docs/screenshots/) of every view, taken with Debian Chromium via Playwright.

    python -m dashboard.demo.screenshots DEMO_DIR [OUT_DIR=docs/screenshots]
DEMO_DIR is filled by dashboard.demo.build (a real tiny sweep) if it is empty.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from dashboard.demo.build import make

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = [
    ("runs", "#runs-table tbody tr", None),
    ("curves", "#plot-loss .scatterlayer .trace", None),
    ("evals", "#plot-eval-flops .scatterlayer .trace", None),
    ("scaling", "#scaling-frontier .scatterlayer .trace", "?fit=chinchilla-a3.json"),
    ("scaling-batch-lr", "#scaling-opt_lr .scatterlayer .trace", "?fit=batch-lr.json"),
    ("scaling-chain", "#scaling-chain .scatterlayer .trace", "?fit=accuracy.json"),
    ("scaling-lr-annealing", "#scaling-annealing_curves .scatterlayer .trace", "?fit=lr-annealing.json"),
    ("moe", "#moe-moe_law .scatterlayer .trace", "?fit=moe-krajewski.json&color=granularity"),
    ("moe-routers", "#moe-load_layer0 .hm, #moe-load_layer0 .heatmaplayer", "?fit=moe-krajewski.json"),
    ("plan", "#plan-plan_cost_loss .scatterlayer .trace", "?device=h100-sxm&num-devices=8&usd-per-device-hour=2.5"),
]
CLIP = {"moe": 1150}  # the MoE view's scaling half (the router half is its own shot)


def main(demo_dir: str, out: str = "docs/screenshots") -> None:
    from playwright.sync_api import sync_playwright  # deferred: imports playwright

    made = make(demo_dir)
    out_p = Path(out)
    out_p.mkdir(parents=True, exist_ok=True)
    exe = Path(sys.executable).with_name("scalelab")
    proc = subprocess.Popen(
        [str(exe), "dashboard", "--runs", str(made["runs"]), "--fits", str(made["fits"]), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = re.search(r"http://\S+/", proc.stdout.readline()).group(0)
        for _ in range(50):
            try:
                urllib.request.urlopen(url + "api/runs", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = b.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url + "#runs")
            page.wait_for_selector("#runs-table tbody tr")
            for rid in made["ids"]:
                page.check(f'#runs-table tr[data-id="{rid}"] input.sel')
            for name, wait, query in SHOTS:
                page.goto(f"{url}#{name.split('-')[0]}{query or ''}")
                page.wait_for_selector(wait, timeout=20000)
                page.wait_for_timeout(800)
                if name == "moe-routers":  # the router half of the same page
                    y, height = page.evaluate("""() => {
                        const h = [...document.querySelectorAll('h3')].find(e => e.textContent.startsWith('Routers'));
                        const y = h.getBoundingClientRect().top + window.scrollY - 8;
                        return [y, document.body.scrollHeight - y];
                        }""")
                    page.screenshot(
                        path=str(out_p / f"{name}.png"),
                        full_page=True,
                        clip={"x": 0, "y": y, "width": 1400, "height": height},
                    )
                elif name in CLIP:
                    page.screenshot(
                        path=str(out_p / f"{name}.png"),
                        full_page=True,
                        clip={"x": 0, "y": 0, "width": 1400, "height": CLIP[name]},
                    )
                else:
                    page.screenshot(path=str(out_p / f"{name}.png"), full_page=True)
                print(out_p / f"{name}.png")
            b.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main(*sys.argv[1:])
