"""The user's own app, data and reward, end to end: an app that returns its answer, a JSONL of
its questions, a reward function outside the app; tracerl eval and tracerl train on them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import tracerl
from tracerl.cli.main import main
from tracerl.core.types import TerminationReason
from tracerl.testing import ScriptedServer

APP = '''
import tracerl

SYSTEM = "End your reply with: The answer is <answer>."


@tracerl.rollout(timeout_s=60)
def solve(task, config):
    client = config.openai_client()
    reply = client.chat.completions.create(model=config.model, **config.sampling, messages=[
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": task.data["prompt"]}])
    return reply.choices[0].message.content or ""   # what it produced; the reward is not its business
'''
REWARDS = '''
import math

def strict(task, artifacts):
    text = artifacts["answer"].strip()
    return float(text.endswith(f"The answer is {task.answer}."))

def broken(task, artifacts):
    raise KeyError("score")

def nan(task, artifacts):
    return math.nan

def steps(task, episode):   # the whole episode: rewards how many calls it took
    return {"reward": 1.0 / len(episode.steps), "is_correct": True}
'''


def _rows() -> list[dict]:
    out = []
    for a in range(10):
        for b in range(10):
            for op, value in (("+", a + b), ("-", a - b), ("*", a * b)):
                out.append({"prompt": f"What is {a} {op} {b}?", "solution": value})
    return out


@pytest.fixture
def project(tmp_path):
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "rewards.py").write_text(REWARDS)
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    return tmp_path


@pytest.mark.slow
def test_own_app_data_and_reward_train_and_held_out_accuracy_rises(project):
    """The short variant of the own-data path (docs/performance.md has the long one)."""
    out = project / "run"
    code = main(["train", "--data", str(project / "tasks.jsonl"), "--holdout", "0.2",
                 "--agent", f"{project / 'app.py'}:solve", "--reward", f"{project / 'rewards.py'}:strict",
                 "--set", "data.answer=solution", "--set", "data.columns.question=prompt",
                 "--steps", "12", "--batch-size", "8", "--group-size", "8", "--eval-size", "48",
                 "--set", "eval_every=0", "--set", "save_every=0", "--seed", "1", "--output", str(out), "--quiet"])
    assert code == 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [m["eval/accuracy"] for m in lines if "eval/accuracy" in m]
    assert evals[-1] >= evals[0] + 0.2, evals
    rewards = [m["rollout/reward_mean"] for m in lines if "rollout/reward_mean" in m]
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3


def test_eval_grades_what_the_app_returns_with_a_builtin_grader(project, capsys):
    out = project / "eval"
    code = main(["eval", "--data", str(project / "tasks.jsonl"), "--agent", f"{project / 'app.py'}:solve",
                 "--reward", "regex", "--set", r"reward_options.pattern=(?:The answer is|Answer:) (-?\d+)\.?\s*$",
                 "--set", "data.answer=solution", "--max-examples", "12", "--output", str(out)])
    assert code == 0
    episodes = [tracerl.Episode.model_validate_json(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 12 and all(ep.artifacts["answer"] for ep in episodes)
    assert all(ep.reward in (0.0, 1.0) for ep in episodes)
    assert any(ep.reward == 1.0 for ep in episodes)  # the tiny model gets some single-digit sums right
    assert all(ep.termination_reason is TerminationReason.SUCCESS for ep in episodes)


@pytest.mark.parametrize(("reward", "message"), [
    ("broken", "grading failed: KeyError: 'score'"),
    ("nan", "grading failed: GradingError: the reward function returned a non-finite reward (nan)"),
])
def test_a_failing_reward_function_marks_its_episodes_never_the_run(project, tracing, reward, message):
    from tracerl.tasks.graders import resolve_reward
    from tracerl.trainers.rollouts import load_agent

    solve = load_agent(f"{project / 'app.py'}:solve")
    grader = resolve_reward(f"{project / 'rewards.py'}:{reward}")
    with ScriptedServer(lambda messages, tools: "The answer is 2.", tracer_provider=tracing.provider) as server:
        settings = tracerl.RolloutSettings(gateway_url=server.url)
        ep = solve({"id": "t", "data": {"prompt": "1+1?"}, "answer": 2}, settings, tracing=tracing, reward=grader)
    assert ep.termination_reason is TerminationReason.GRADING_ERROR and ep.error.startswith(message), ep.error
    assert ep.reward is None and ep.steps  # the episode itself is kept
    # the trace says so too: read back later, the episode is still a grading error
    tracing.flush()
    store = next(iter(tracing.stores.values()))
    again = tracerl.episode_from_spans(store.spans(session_id=ep.id), episode_id=ep.id)
    assert again.termination_reason is TerminationReason.GRADING_ERROR and again.artifacts == ep.artifacts


def test_rewards_from_the_grader_are_in_the_trace_and_may_see_the_episode(project, tracing):
    from tracerl.tasks.graders import resolve_reward
    from tracerl.trainers.rollouts import load_agent

    solve = load_agent(f"{project / 'app.py'}:solve")
    with ScriptedServer(lambda messages, tools: "The answer is 2.", tracer_provider=tracing.provider) as server:
        settings = tracerl.RolloutSettings(gateway_url=server.url)
        task = {"id": "t", "data": {"prompt": "1+1?"}, "answer": 2}
        strict = solve(task, settings, tracing=tracing, reward=resolve_reward(f"{project / 'rewards.py'}:strict"))
        whole = solve(task, settings, tracing=tracing, reward=resolve_reward(f"{project / 'rewards.py'}:steps"))
    assert strict.reward == 1.0 and strict.artifacts == {"answer": "The answer is 2."}
    assert whole.reward == 1.0 and whole.is_correct is True
    store = next(iter(tracing.stores.values()))
    again = tracerl.episode_from_spans(store.spans(session_id=strict.id), episode_id=strict.id)
    assert again.reward == 1.0 and not math.isnan(again.reward)


def test_a_reward_spec_that_does_not_import_is_one_line(project, capsys):
    code = main(["eval", "--data", str(project / "tasks.jsonl"), "--reward", "no_such_module_xyz:grade",
                 "--set", "data.answer=solution", "--output", str(project / "e")])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no_such_module_xyz" in err[0] and err[0].startswith("tracerl: error:")


def test_a_reward_function_with_the_wrong_signature_is_one_line(project, capsys):
    (project / "bad.py").write_text("def grade(answer):\n    return 1.0\n")
    code = main(["eval", "--data", str(project / "tasks.jsonl"), "--reward", f"{project / 'bad.py'}:grade",
                 "--set", "data.answer=solution", "--output", str(project / "e")])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "grade(answer)" in err[0] and "takes (task, artifacts)" in err[0], err


def test_the_readme_own_data_example_runs_as_written(tmp_path, capsys):
    """The README's app.py and reward.py, copied out of it, evaluate as its command says."""
    import re

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(# (app|reward)\.py.*?)```", readme, re.DOTALL)
    assert {name for _, name in blocks} == {"app", "reward"}
    for code, name in blocks:
        (tmp_path / f"{name}.py").write_text(code)
    (tmp_path / "tasks.jsonl").write_text("".join(
        json.dumps({"question": f"What is {a} + 1?", "answer": a + 1}) + "\n" for a in range(6)))
    code = main(["eval", "--data", str(tmp_path / "tasks.jsonl"), "--agent", f"{tmp_path / 'app.py'}:solve",
                 "--reward", f"{tmp_path / 'reward.py'}:grade", "--output", str(tmp_path / "eval")])
    assert code == 0
    episodes = [tracerl.Episode.model_validate_json(x) for x in (tmp_path / "eval" / "episodes.jsonl").read_text()
                .splitlines()]
    assert len(episodes) == 6 and all(ep.reward in (0.0, 1.0) and ep.artifacts for ep in episodes)


def test_without_an_agent_the_rows_question_is_asked_as_it_is(tmp_path):
    rows = [{"question": f"What is {a} + 2?", "answer": a + 2} for a in range(4)]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["eval", "--data", str(tmp_path / "q.jsonl"), "--reward", "regex", "--set",
                 r"reward_options.pattern=(-?\d+)\D*$", "--output", str(tmp_path / "e")])
    assert code == 0
    episodes = [tracerl.Episode.model_validate_json(x) for x in (tmp_path / "e" / "episodes.jsonl").read_text()
                .splitlines()]
    assert sorted(ep.steps[0].input_messages[0].content for ep in episodes) == sorted(r["question"] for r in rows)
    assert all(ep.reward is not None for ep in episodes)
