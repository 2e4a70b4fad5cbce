"""The examples run as a user runs them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tracerl
from tracerl.models import tiny_model_path
from tracerl.tasks.synthetic import FEEDBACK, TASKS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_trace_to_episode_example(tmp_path):
    db = tmp_path / "demo.db"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trace_to_episode.py"), "--db", str(db)],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = " ".join(proc.stdout.split())
    assert "4 episodes, 8 LLM calls, 8 framework spans joined to their token spans" in out
    assert "accuracy 100%" in out
    from tracerl.core.store import SpanStore

    with SpanStore(db) as store:
        assert len([s for s in store.sessions() if s.llm_calls]) == 4


def _run_example(name: str, tmp_path: Path, tasks: int = 3, *options: str) -> list:
    """Run ``examples/<name>.py`` as a user does (in-process gateway, tiny model) and read its
    episodes back from the span store it wrote."""
    from tracerl.core.convert import episodes_from_store
    from tracerl.core.store import SpanStore

    db = tmp_path / f"{name}.db"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / f"{name}.py"), "--tasks", str(tasks), "--db", str(db), *options],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{tasks} episodes" in " ".join(proc.stdout.split())
    with SpanStore(db) as store:
        episodes = [ep for ep in episodes_from_store(store) if ep.task is not None]
    assert len(episodes) == tasks
    for ep in episodes:
        assert ep.termination_reason is tracerl.TerminationReason.SUCCESS, (ep.id, ep.error)
        assert all(s.has_tokens and s.response_logprobs for s in ep.steps)
        assert all(len(t.sequences) == 1 and t.prefix_breaks == 0 for t in ep.trajectories)
    return episodes


@pytest.mark.slow
def test_an_example_runs_the_demo_task_on_a_given_model(tmp_path):
    """`python examples/math_agent_litellm.py --task calculator --model DIR`: the demo's problems
    on a model folder (here the bundled model's own files, as a checkpoint would be)."""
    episodes = _run_example("math_agent_litellm", tmp_path, 2, "--task", "calculator",
                            "--model", str(tiny_model_path()))
    assert {ep.task.dataset for ep in episodes} == {"calculator"}
    assert all(ep.steps[0].tools for ep in episodes)  # the calculator offered


@pytest.mark.slow
def test_iterative_refinement_example(tmp_path):
    multiturn = TASKS["multiturn"]
    for ep in _run_example("refine_multiturn", tmp_path):
        (traj,) = ep.trajectories
        assert traj.name == "solver"
        answers = [s.output_message.content for s in traj.steps]
        turns = len(answers)
        assert [s.sequence for s in traj.steps] == list(range(turns))
        # feedback after every wrong answer but the last allowed one; nothing after a right one
        assert not any(multiturn.is_correct(ep.task, a) for a in answers[:-1])
        assert multiturn.is_correct(ep.task, answers[-1]) or turns == multiturn.max_turns
        assert all(s.input_messages[-1].content == FEEDBACK for s in traj.steps[1:])
        assert ep.reward == traj.reward == multiturn.reward(ep.task, answers[-1], turns=turns)
        # one training sequence: the model's tokens of every turn, the feedback masked out
        (seq,) = traj.sequences
        assert sum(seq.mask) == sum(len(s.response_ids) for s in traj.steps)


@pytest.mark.slow
def test_solver_judge_example(tmp_path):
    def says_yes(verdict: str) -> bool:  # the example's rule: the first "yes" or "no" decides
        found = re.search(r"\b(yes|no)\b", verdict, re.IGNORECASE)
        return found is not None and found[1].lower() == "yes"

    arithmetic = TASKS["arithmetic"]
    for ep in _run_example("solver_judge", tmp_path):
        assert [t.name for t in ep.trajectories] == ["solver", "judge"]
        solver, judge = ep.trajectories
        assert [s.sequence for s in solver.steps] == [0] and [s.sequence for s in judge.steps] == [1]
        answer = solver.steps[0].output_message.content
        verdict = judge.steps[0].output_message.content
        assert answer in judge.steps[0].input_messages[-1].content  # the judge saw the solver's answer
        correct = arithmetic.is_correct(ep.task, answer)
        assert ep.reward == solver.reward == float(correct) and ep.is_correct is correct
        assert judge.reward == float(says_yes(verdict) == correct)  # its own reward, not the episode's
        assert ep.rewards == {"reward": float(correct)}


@pytest.mark.slow
def test_self_debate_example(tmp_path):
    arithmetic = TASKS["arithmetic"]
    for ep in _run_example("self_debate", tmp_path):
        assert [t.name for t in ep.trajectories] == ["debater_a", "debater_b"]
        a, b = ep.trajectories
        assert [s.sequence for s in a.steps] == [0, 2] and [s.sequence for s in b.steps] == [1, 3]
        for traj, other in ((a, b), (b, a)):
            # round 2 rebuts the other debater's round-1 answer, in the same conversation
            rebuttal = traj.steps[1].input_messages[-1].content
            assert other.steps[0].output_message.content in rebuttal
            assert traj.steps[1].input_messages[-2].content == traj.steps[0].output_message.content
            # per-step rewards on the step that answered; the final reward on the last answer
            answers = [s.output_message.content for s in traj.steps]
            assert [s.reward for s in traj.steps] == [float(arithmetic.is_correct(ep.task, x)) for x in answers]
            assert traj.reward == float(arithmetic.is_correct(ep.task, answers[-1]))
        assert ep.reward == b.reward


def test_the_real_model_recipes_data_are_what_make_data_writes_and_disjoint():
    import importlib.util
    import json

    folder = ROOT / "examples" / "real_model"
    spec = importlib.util.spec_from_file_location("real_model_data", folder / "make_data.py")
    assert spec is not None and spec.loader is not None
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    rows = make.rows()
    files = {name: [json.loads(line) for line in (folder / name).read_text().splitlines()]
             for name in ("train.jsonl", "test.jsonl")}
    assert files["test.jsonl"] == [r for r in rows if make.held_out(r)]  # shipped = regenerated
    assert files["train.jsonl"] == [r for r in rows if not make.held_out(r)]
    questions = {name: {r["question"] for r in part} for name, part in files.items()}
    assert not questions["train.jsonl"] & questions["test.jsonl"] and len(questions["test.jsonl"]) >= 200
    assert all(isinstance(r["answer"], int) and r["answer"] >= 1 for r in rows)


@pytest.mark.slow
def test_the_anthropic_sdk_agent_is_its_chat_completions_twin_and_trains(tmp_path):
    """examples/math_agent_anthropic.py (the anthropic SDK on /v1/messages, no adapter) against
    math_agent_litellm.py (Chat Completions), greedy on the same tasks: the same steps, tokens,
    masks and rewards; then `tracerl train` runs 2 steps on it."""
    def shape(episodes: list) -> list:
        return [(ep.task.id, ep.reward, [(s.prompt_ids, s.response_ids, s.output_message.tool_calls != [])
                                         for s in ep.steps],
                 [(q.token_ids, q.mask) for t in ep.trajectories for q in t.sequences])
                for ep in sorted(episodes, key=lambda e: e.task.id)]

    ours = _run_example("math_agent_anthropic", tmp_path, 12)
    twin = _run_example("math_agent_litellm", tmp_path, 12)
    assert shape(ours) == shape(twin)
    assert any(len(ep.steps) > 1 for ep in ours)  # tool rounds among them (3 of 12 when written)
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "tracerl.cli.main", "train", "arithmetic", "--agent",
                           str(ROOT / "examples" / "math_agent_anthropic.py") + ":solve", "--steps", "2",
                           "--batch-size", "2", "--group-size", "2", "--eval-size", "0", "--output", str(run),
                           "--quiet"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"rollout/' in line]
    assert [m["step"] for m in steps] == [1, 2]
    assert all(m["rollout/episodes"] == 4 and m["rollout/missing_token_ids"] == 0 for m in steps)
