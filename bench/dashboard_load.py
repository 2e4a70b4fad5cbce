"""How fast the dashboard opens a run of ~1,000 episodes, in headless Chromium.

    .venv/bin/python bench/dashboard_load.py [--run DIR] [--repeat 5]

Without --run it trains one first (runs/dashboard-bench: the bundled model on arithmetic, 16
steps x 8 tasks x 8 samples = 1,024 rollouts plus 64 evaluations; made once, reused after).
Measured, median of --repeat page loads each in a fresh page (the server stays up, as when a
user reloads):
  overview     navigation to the curves drawn (every key chart; body[data-ready])
  episodes     clicking Episodes to the table filled: the first time in the server's life
               (every episode read from traces.db and converted) and again (cached)
  diagnosis    clicking "Why zero" to its table (episodes cached)
Needs Debian's chromium (or TRACERL_CHROMIUM) and the [dev] extra's playwright.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def make_run(out: Path) -> None:
    if (out / "run.json").is_file():
        return
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "tracerl", "train", "arithmetic", "--steps", "16", "--batch-size", "8",
                    "--group-size", "8", "--eval-size", "64", "--output", str(out), "--quiet"], check=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"})


def serve(run: Path) -> tuple[str, object]:
    import uvicorn

    from tracerl.gateway.server import bind_socket
    from tracerl.runs.server import Runs, create_app

    sock = bind_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(Runs([run])), log_level="warning"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return f"http://127.0.0.1:{sock.getsockname()[1]}/", server


def timed(page, action: str, target: str, ready: str) -> float:
    """Seconds from ``page.goto(target)`` or ``page.click(target)`` to ``ready`` showing."""
    t0 = time.perf_counter()
    getattr(page, action)(target)
    page.wait_for_selector(ready, timeout=120_000)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    run = args.run or REPO / "runs" / "dashboard-bench"
    if args.run is None:
        make_run(run)
    from playwright.sync_api import sync_playwright

    from tracerl.core.store import SpanStore

    with SpanStore(run / "traces.db", read_only=True) as store:
        episodes = len(store.sessions())
    url, _server = serve(run)
    chromium = os.environ.get("TRACERL_CHROMIUM") or shutil.which("chromium")
    results: dict[str, list[float]] = {"overview": [], "episodes (first)": [], "episodes (cached)": [], "diagnosis": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for i in range(args.repeat):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            results["overview"].append(timed(page, "goto", url, "body[data-ready='1']"))
            key = "episodes (first)" if i == 0 else "episodes (cached)"
            results[key].append(timed(page, "click", "#tabs [data-tab=episodes]", "#episode-table tr.click"))
            results["diagnosis"].append(timed(page, "click", "#tabs [data-tab=diagnosis]", "#diagnosis-body tr[data-cause]"))
            page.close()
        browser.close()
    print(f"run {run}: {episodes} episodes")
    print("| view | median s | runs |\n|---|---|---|")
    for name, values in results.items():
        if values:
            print(f"| {name} | {statistics.median(values):.3f} | {len(values)} |")


if __name__ == "__main__":
    main()
