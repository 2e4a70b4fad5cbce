"""The path from a running app to a trained model, as README.md and docs/gateway.md show it
(issue 40): the test reads the command block between the ``app-to-model`` markers of each page
and runs its lines, in order, in a fresh folder, as a user pastes them into a shell.

One change to what the user runs: the gateway binds a free port (``--port 0``, which it prints)
instead of 8000, which a parallel test may hold; ``OPENAI_BASE_URL`` then names that port, as
the user's shell would if they chose another (``production.py`` reads it, default :8000).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "README.md", ROOT / "docs" / "gateway.md")


def commands(page: Path) -> list[str]:
    """The shell lines of the page's app-to-model block, comments cut."""
    text = page.read_text()
    found = re.search(r"<!-- app-to-model -->\s*```bash\n(.*?)```\s*<!-- /app-to-model -->", text, re.S)
    assert found, f"{page}: no app-to-model block"
    return [re.sub(r"\s+#.*$", "", line).strip() for line in found.group(1).splitlines() if line.strip()]


def test_both_pages_show_the_same_path_in_the_users_order():
    readme, gateway = (commands(p) for p in PAGES)
    assert readme == gateway
    order = ["tracerl init", "tracerl gateway serve", "python production.py", "tracerl traces export",
             "tracerl train --from-traces"]
    assert [next(i for i, c in enumerate(readme) if c.startswith(o)) for o in order] == list(range(len(order)))
    assert "--agent app.py:run" in readme[-1] and "--reward" in readme[-1]  # evaluates the app itself


def _wait_for_url(proc: subprocess.Popen[str], log: Path) -> str:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = re.search(r"serving .* on (http://127\.0\.0\.1:\d+/v1)", log.read_text())
        if found:
            return found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"the gateway did not start; it wrote:\n{log.read_text()[-3000:]}")


def test_the_app_to_model_commands_run_as_written(tmp_path):
    lines = commands(PAGES[0])
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "TRACERL_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    env.pop("OPENAI_BASE_URL", None)
    cwd, gateway, outputs = tmp_path, None, []
    log = tmp_path / "gateway.log"
    try:
        for line in lines:
            if line.endswith("&"):  # the server, in the background, on a port it picks and prints
                with open(log, "w") as fh:
                    gateway = subprocess.Popen([*line.rstrip("&").split(), "--port", "0"], cwd=cwd, env=env,
                                               stdout=fh, stderr=subprocess.STDOUT, text=True)
                env["OPENAI_BASE_URL"] = _wait_for_url(gateway, log)
                continue
            first, _, then = line.partition(" && cd ")
            proc = subprocess.run(first, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=400)
            assert proc.returncode == 0, f"{first}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
            outputs.append(proc.stdout + proc.stderr)
            if then:
                cwd = cwd / then
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(timeout=30)
    _, produced, exported, trained = outputs
    assert "60 runs of the app recorded" in produced
    assert re.search(r"exported \d+ spans to app\.jsonl", exported)
    # every recorded run accounted for: 60 read, the held-out rows' runs left out, none dropped unsaid
    counted = re.search(r"60 episodes read, (\d+) kept; left out (\d+) of 60 episodes as held out", trained)
    assert counted and int(counted.group(1)) + int(counted.group(2)) == 60, trained[-3000:]
    assert "dropped 0 without a reward" in trained and "0 without the policy's token ids" in trained
    # the app answers greedily (app.run), so the same runs pass every time: 6 of the 46 kept
    assert "training on 6 trajectories of 46 episodes" in trained, trained[-3000:]
    assert re.search(r"accuracy before: \d+\.\d%", trained) and re.search(r"accuracy after: +\d+\.\d%", trained)
    assert (cwd / "runs" / "from-traces" / "metrics.jsonl").is_file()
