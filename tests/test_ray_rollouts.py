"""--rollout-workers on a real Ray cluster of two nodes (a head and a second raylet), on
127.0.0.1 only (tests/ray_loopback.py: namespaces of its own, started and ended by the tests).

The agents run in Ray actors spread over both nodes and reach the run's gateway over HTTP and
OTLP; rank 0 assembles and grades the episodes. The same LangGraph training on threads and on
workers gives the same episodes and metric keys; a worker whose process exits mid-step costs
only its episodes, and the step completes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
import ray_loopback  # noqa: E402  (tests/ is on the path, as for pg)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parent.parent
SMALL = ["--batch-size", "2", "--group-size", "2", "--eval-size", "0", "--set", "tensorboard=false",
         "--set", "rollout.max_tokens=24", "--threads", "1", "--quiet", "--seed", "3"]
LANGGRAPH = ["--agent", str(ROOT / "examples" / "math_agent_langgraph.py") + ":solve"]
WORKERS = ["--rollout-workers", "2", "--ray-address", "{address}"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs on one cluster: LangGraph on threads, the same on two workers, and a run
    whose first worker to finish an LLM call exits."""
    why = ray_loopback.unavailable()
    if why:
        pytest.skip(why)
    folder = tmp_path_factory.mktemp("ray")
    train = [sys.executable, "-m", "tracerl", "train"]
    out = {name: folder / name for name in ("threads", "workers", "exits")}
    commands = [
        ([*train, "calculator", *LANGGRAPH, "--steps", "2", "--output", str(out["threads"]), *SMALL], {}),
        ([*train, "calculator", *LANGGRAPH, "--steps", "2", "--output", str(out["workers"]), *SMALL, *WORKERS], {}),
        ([*train, "arithmetic", "--agent", f"{Path(__file__).parent / 'rollout_agents.py'}:exiting_agent",
          "--steps", "2", "--output", str(out["exits"]), *SMALL, *WORKERS, "--set", "concurrency=2"], {}),
    ]
    marker = {"TRACERL_TEST_EXIT_MARKER": str(folder / "exited")}  # only exiting_agent reads it
    finished, cluster_log = ray_loopback.run_on_cluster(commands, folder / "logs", cluster_env=marker, timeout_s=480)
    assert len(finished) == len(commands), f"the cluster or a run did not finish:\n{cluster_log[-4000:]}"
    for name, done in zip(out, finished, strict=True):
        assert done.rc == 0, f"{name} exited {done.rc}:\n{done.tail()}"
    return out, folder


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _episodes(out: Path) -> dict[str, tuple]:
    """Each episode by its place in the run (step, task, sample), with its shape."""
    from tracerl.runs.episodes import load_episodes
    from tracerl.runs.folder import open_run

    store = open_run(out).store()
    assert store is not None
    try:
        found = {}
        for ep, _ in load_episodes(store):
            place = ep.id.split("-", 1)[1]  # the run's nonce first
            calls = [s for t in ep.trajectories for s in t.steps]
            found[place] = (ep.termination_reason.value, sorted(t.name for t in ep.trajectories), ep.reward is not None,
                            all(s.response_ids and len(s.response_logprobs) == len(s.response_ids) for s in calls))
        return found
    finally:
        store.close()


def test_a_langgraph_run_on_two_ray_nodes_matches_the_threaded_run(runs):
    out, _ = runs
    a, b = _metrics(out["threads"]), _metrics(out["workers"])
    assert [m["step"] for m in a] == [m["step"] for m in b] == [1, 2]
    assert {k for m in b for k in m} - {k for m in a for k in m} == {"rollout/worker_lost", "rollout/worker_nodes"}
    assert {k for m in a for k in m} <= {k for m in b for k in m}
    assert [m["rollout/worker_lost"] for m in b] == [0.0, 0.0]
    assert [m["rollout/worker_nodes"] for m in b] == [2.0, 2.0]  # the workers were spread over both nodes
    assert [m["rollout/episodes"] for m in b] == [m["rollout/episodes"] for m in a] == [4.0, 4.0]
    ea, eb = _episodes(out["threads"]), _episodes(out["workers"])
    assert sorted(ea) == sorted(eb) and len(ea) == 8
    for place, (reason, names, rewarded, tokens) in eb.items():
        assert reason == "success" and rewarded and tokens, (place, eb[place])
        assert names == ea[place][1], place  # the same agents (trajectories)


def test_a_worker_that_exits_mid_step_costs_only_its_episodes(runs):
    out, folder = runs
    assert (folder / "exited").exists()  # a worker did exit, after its LLM call
    steps = _metrics(out["exits"])
    assert [m["step"] for m in steps] == [1, 2]
    lost = sum(m["rollout/worker_lost"] for m in steps)
    assert lost >= 1
    assert sum(m.get("episodes/error", 0.0) for m in steps) == lost
    assert all(m["rollout/episodes"] == 4.0 for m in steps)
    lost_episodes = [v for v in _episodes(out["exits"]).values() if v[0] == "error"]
    assert len(lost_episodes) == lost
