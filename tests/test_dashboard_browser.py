"""The dashboard in a real headless Chromium (Debian's, driven by Playwright): the reward curve
has a point per step, an episode opens with one coloured token per token and the mask's count
of model tokens, the termination filter filters, a live run gains points without a reload,
and the one-file report opens from disk. Screenshots go to test-artifacts/dashboard/."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = os.environ.get("TRACERL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="no chromium (.ci/run installs it)")]
ARTIFACTS = Path(os.environ.get("TRACERL_TEST_ARTIFACTS", Path(__file__).parent.parent / "test-artifacts")) / "dashboard"


class Served:
    """The dashboard app on 127.0.0.1 in a thread, as `tracerl dashboard` serves it."""

    def __init__(self, runs: list[Path]):
        import uvicorn

        from tracerl.gateway.server import bind_socket
        from tracerl.runs.server import Runs, create_app

        self.sock = bind_socket("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        self.server = uvicorn.Server(uvicorn.Config(create_app(Runs(runs)), log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    pg.close()
    assert not errors, errors  # no script error anywhere along the way


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _points(page, metric: str) -> int:
    return int(page.get_attribute(f'.chart[data-metric="{metric}"]', "data-points"))


def _steps_with(run: Path, key: str) -> int:
    return sum(key in json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines())


def test_curves_episode_tokens_and_filters(short_run, page):
    served = Served([short_run])
    try:
        page.goto(served.url)
        page.wait_for_selector("body[data-ready='1']")
        assert _points(page, "rollout/reward_mean") == _steps_with(short_run, "rollout/reward_mean") == 3
        assert _points(page, "eval/accuracy") == _steps_with(short_run, "eval/accuracy")
        _shot(page, "curves")

        page.click("#tabs [data-tab=episodes]")
        page.select_option("#filters select[name=termination]", "error")
        page.wait_for_function("document.querySelectorAll('#episode-table tr.click').length > 0 && "
                               "[...document.querySelectorAll('#episode-table tr.click')].every(r => r.dataset.termination === 'error')")
        errors = page.locator("#episode-table tr.click").count()
        from tracerl.runs.views import RunView

        assert errors == RunView(short_run).episode_rows(termination="error")["total"]
        _shot(page, "episodes-errors")

        page.select_option("#filters select[name=termination]", "success")
        page.fill("#filters input[name=step]", "1")
        page.wait_for_function("[...document.querySelectorAll('#episode-table tr.click')].every(r => r.dataset.termination === 'success')")
        row = page.locator("#episode-table tr.click").first
        episode_id = row.get_attribute("data-id")
        row.click()
        page.click("#detail-tabs [data-view=tokens]")
        page.wait_for_selector(".seq[data-sequence='0'] .tok")
        detail = RunView(short_run).episode(episode_id)
        seq = detail["trajectories"][0]["sequences"][0]
        tokens = page.locator(".seq[data-sequence='0'] .tok")
        assert tokens.count() == len(seq["token_ids"])
        assert page.locator(".seq[data-sequence='0'] .tok[data-mask='1']").count() == sum(seq["mask"]) > 0
        page.select_option("#colour", "advantage")
        _shot(page, "tokens")
        page.select_option("#colour", "gap")  # recomputed with the weights that sampled them
        page.wait_for_selector("#sequences p:has-text('mean |Δ|')")

        page.click("#detail-close")
        page.click("#tabs [data-tab=diagnosis]")
        page.wait_for_selector("#diagnosis-body tr[data-cause=agent_error]")
        _shot(page, "diagnosis")
        page.click("#tabs [data-tab=groups]")
        page.wait_for_selector("#group-table tr.click")
        page.locator("#group-table tr.click").first.click()
        page.wait_for_selector("#side-by-side .col")
        assert page.locator("#side-by-side .col").count() == 4  # G rollouts side by side
        _shot(page, "groups")
    finally:
        served.close()


def test_a_live_run_gains_points_without_a_reload(short_run, tmp_path, page):
    run = tmp_path / "live"
    shutil.copytree(short_run, run)
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if json.loads(line).get("step") == 1) + 1
    (run / "metrics.jsonl").write_text("".join(lines[:first]))  # as the run stood after its first step
    served = Served([run])
    try:
        page.goto(served.url)
        page.wait_for_selector("body[data-ready='1']")
        assert _points(page, "rollout/reward_mean") == 1
        with open(run / "metrics.jsonl", "a") as fh:  # the trainer writes on
            fh.writelines(lines[first:])
        page.wait_for_function("document.querySelector('.chart[data-metric=\"rollout/reward_mean\"]').dataset.points === '3'",
                               timeout=15_000)
        _shot(page, "live")
    finally:
        served.close()


def test_the_report_opens_from_disk(short_run, tmp_path, page):
    from tracerl.runs.report import write_report

    out = tmp_path / "report.html"
    write_report(short_run, out)
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    assert _points(page, "rollout/reward_mean") == 3
    page.click("#tabs [data-tab=diagnosis]")
    page.wait_for_selector("#diagnosis-body tr[data-cause]")
    page.click("#tabs [data-tab=episodes]")
    page.wait_for_selector("#episode-table tr.click")
    _shot(page, "report")


def test_a_terminal_episodes_shell_commands_show_in_its_call_tree(terminal_run, page):
    from tracerl.core.store import SpanStore

    shell = [s for s in SpanStore(terminal_run / "traces.db").spans() if s.name == "execute_tool shell"]
    episode = shell[0].session_id
    commands = [json.loads(s.attributes["gen_ai.tool.call.arguments"])["command"] for s in shell
                if s.session_id == episode]
    served = Served([terminal_run])
    try:
        page.goto(served.url)
        page.wait_for_selector("body[data-ready='1']")
        page.click("#tabs [data-tab=episodes]")
        page.fill("#filters input[name=q]", episode)
        page.wait_for_selector(f"#episode-table tr.click[data-id='{episode}']")
        page.click(f"#episode-table tr.click[data-id='{episode}']")
        page.click("#detail-tabs [data-view=tree]")
        page.wait_for_selector("#detail-tree pre.tool-io")
        shown = page.locator("#detail-tree pre.tool-io").all_inner_texts()
        typed = [text.split("\n", 1)[0] for text in shown if text.startswith("$ ")]
        assert len(typed) == len(commands)  # one block per command, the command on its first line
        assert all(t.startswith("$ " + c.splitlines()[0][:30]) for t, c in zip(typed, commands))
        assert any("[exit status" in text for text in shown)  # with what the shell answered
        _shot(page, "terminal-call-tree")
    finally:
        served.close()
