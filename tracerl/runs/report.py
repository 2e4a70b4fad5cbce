"""``tracerl report RUN --html out.html``: the dashboard's page in one self-contained file.

The file is static/index.html with the style sheet, uPlot and app.js inlined and the run's
data embedded as ``window.TRACERL_REPORT``: curves, the diagnosis, and a sample of episodes in
full (the first episodes of each cause, then the best and worst of the last step), so it can
be attached to an issue or a pull request and opened anywhere without a server or a network.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .server import STATIC
from .views import RunView


def report_data(view: RunView, episodes: int = 40) -> dict[str, Any]:
    rows = view.episode_rows(limit=100_000)["rows"]
    chosen: list[str] = []
    by_cause: dict[str, list[str]] = {}
    for r in rows:
        if r["diagnosis"]:
            by_cause.setdefault(r["diagnosis"]["code"], []).append(r["id"])
    for ids in by_cause.values():
        chosen += ids[:3]
    train = [r for r in rows if r["kind"] == "train"]
    last = max((r["step"] for r in train), default=None)
    at_last = sorted((r for r in train if r["step"] == last), key=lambda r: -(r["reward"] or 0.0))
    for r in at_last[:episodes // 2] + at_last[::-1][:episodes // 2]:
        chosen.append(r["id"])
    chosen = list(dict.fromkeys(chosen))[:episodes]
    details = {i: found for i in chosen if (found := view.episode(i)) is not None}
    kept = [r for r in rows if r["id"] in details] + [r for r in rows if r["id"] not in details][:500]
    name = view.name
    return {"runs": [view.info()], "metrics": {name: view.metrics()}, "diagnosis": {name: view.diagnosis()},
            "episodes": {name: kept}, "details": {name: details}}


def write_report(run: Path | str, out: Path | str, episodes: int = 40) -> int:
    """Write the report of ``run`` to ``out``; returns its size in bytes."""
    view = RunView(run)
    data = report_data(view, episodes)
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    css = (STATIC / "vendor" / "uPlot.min.css").read_text() + (STATIC / "style.css").read_text()
    page = page.replace('<link rel="stylesheet" href="static/vendor/uPlot.min.css">\n', "")
    page = page.replace('<link rel="stylesheet" href="static/style.css">', f"<style>{css}</style>")
    embedded = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")  # no early </script>
    scripts = (f"<script>window.TRACERL_REPORT = {embedded};</script>\n"
               f"<script>{(STATIC / 'vendor' / 'uPlot.iife.min.js').read_text()}</script>\n"
               f"<script>{(STATIC / 'app.js').read_text()}</script>")
    page = page.replace('<script src="static/vendor/uPlot.iife.min.js"></script>\n<script src="static/app.js"></script>',
                        scripts)
    page = page.replace("<title>tracerl dashboard</title>", f"<title>tracerl report: {view.name}</title>")
    Path(out).write_text(page, encoding="utf-8")
    return len(page.encode())


__all__ = ["report_data", "write_report"]
