"""A dashboard screenshot of one run's episode, for the docs (Debian's chromium via Playwright).

    python scripts/screenshot_episode.py RUN OUT.png [--calls 2] [--colour mask]

Opens ``tracerl dashboard RUN`` in headless chromium, picks the first rewarded training episode
with at least ``--calls`` LLM calls (a tool round trip), opens its training tokens coloured by
``--colour`` (mask, advantage, logprob, gap) and saves the page as a PNG.
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--colour", default="mask")
    args = ap.parse_args()
    import uvicorn
    from playwright.sync_api import sync_playwright

    from tracerl.gateway.server import bind_socket
    from tracerl.runs.server import Runs, create_app
    from tracerl.runs.views import RunView

    rows = RunView(args.run).episode_rows(kind="train", min_reward=1.0, limit=100000)["rows"]
    chosen = next((r for r in rows if r["llm_calls"] >= args.calls), None)
    if chosen is None:
        raise SystemExit(f"{args.run}: no rewarded training episode with {args.calls}+ LLM calls")
    sock = bind_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(Runs([args.run])), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.goto(f"http://127.0.0.1:{sock.getsockname()[1]}/")
            page.wait_for_selector("body[data-ready='1']")
            page.click("#tabs [data-tab=episodes]")
            page.fill("#filters input[name=q]", chosen["id"])
            page.wait_for_selector(f"#episode-table tr.click[data-id='{chosen['id']}']")
            page.click(f"#episode-table tr.click[data-id='{chosen['id']}']")
            page.click("#detail-tabs [data-view=tokens]")
            page.wait_for_selector(".seq[data-sequence='0'] .tok")
            page.select_option("#colour", args.colour)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out), full_page=True)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    print(f"{args.out}: episode {chosen['id']} ({chosen['llm_calls']} calls, reward {chosen['reward']})")


if __name__ == "__main__":
    main()
