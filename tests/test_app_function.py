"""Evaluate the app that made the traces: its own ``run(question)`` as ``--agent app.py:run``,
its OpenAI client reaching the run's gateway without a ``config``, and a run whose episodes
nothing graded saying "not measured" / "no reward" everywhere, never 0 %."""

from __future__ import annotations

import json
import os
import re

import pytest

import tracerl
from tracerl.cli.main import main
from tracerl.core.errors import ConfigError
from tracerl.core.rollout import RolloutContext
from tracerl.core.types import Task, TerminationReason

ZERO = re.compile(r"(?<![\d.])0\.0 ?%")  # a 0 % accuracy (not the end of 100.0%)

# The app as it runs in production: its client from the environment, its own model name, no tracerl.
APP = '''
from openai import AsyncOpenAI, OpenAI

MODEL = "my-app-model"


def run(question):
    client = OpenAI()  # OPENAI_BASE_URL / OPENAI_API_KEY, as in production
    reply = client.chat.completions.create(model=MODEL, max_tokens=8, temperature=0,
                                           messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content or ""


async def styled(question, tone):
    client = AsyncOpenAI()
    reply = await client.chat.completions.create(model=MODEL, max_tokens=8, temperature=0, messages=[
        {"role": "system", "content": f"Answer in a {tone} tone."}, {"role": "user", "content": question}])
    return reply.choices[0].message.content or ""


def needs_context(question, context):
    return question + context
'''
ROWS = [{"prompt": f"What is {a} + {b}?", "solution": a + b, "tone": "dry"} for a in range(4) for b in range(4)]
COLUMNS = ["--set", "data.columns.question=prompt", "--set", "data.answer=solution"]


@pytest.fixture
def app(tmp_path):
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return tmp_path


def _episodes(folder) -> list[tracerl.Episode]:
    return [tracerl.Episode.model_validate_json(x) for x in (folder / "episodes.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("fn", ["run", "styled"])
def test_eval_runs_the_apps_own_function_through_the_gateway_and_grades_its_reply(app, capsys, monkeypatch, fn):
    pytest.importorskip("torch")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # production's: no call may go there
    out = app / "eval"
    code = main(["eval", "--data", str(app / "tasks.jsonl"), *COLUMNS, "--agent", f"{app / 'app.py'}:{fn}",
                 "--reward", "regex", "--set", r"reward_options.pattern=(-?\d+)", "--model-name", "my-app-model",
                 "--max-examples", "3", "--output", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    episodes = _episodes(out)
    assert len(episodes) == 3
    for ep in episodes:
        assert ep.termination_reason is TerminationReason.SUCCESS, ep.error
        (step,) = ep.steps  # the app's one call, filed under its episode by the baggage
        assert step.has_tokens and step.output_message is not None
        assert ep.artifacts["answer"] == step.output_message.content  # what it returned is what was graded
        assert ep.reward in (0.0, 1.0)
    if fn == "styled":  # the second column reached the app by its name
        assert all("dry tone" in ep.steps[0].input_messages[0].content for ep in episodes)
    assert re.search(r"accuracy\s+\S+\s+\d+\.\d%", printed), printed
    assert os.environ["OPENAI_BASE_URL"] == "http://127.0.0.1:9/v1"  # the app's own setting, put back


def test_a_parameter_the_task_lacks_is_one_line_before_any_rollout(app, capsys):
    out = app / "eval"
    code = main(["eval", "--data", str(app / "tasks.jsonl"), *COLUMNS,
                 "--agent", f"{app / 'app.py'}:needs_context", "--output", str(out)])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "needs_context(question, context) needs 'context'" in err[0]
    assert "its columns are ['prompt', 'question', 'solution', 'tone']" in err[0]
    assert "--set data.columns.context=COLUMN" in err[0]
    assert not out.exists()  # nothing ran, nothing was written


def test_train_stops_on_the_mismatch_before_any_rollout(app, capsys):
    pytest.importorskip("torch")
    code = main(["train", "--data", str(app / "tasks.jsonl"), "--holdout", "0.25", *COLUMNS,
                 "--agent", f"{app / 'app.py'}:needs_context", "--steps", "1", "--output", str(app / "run"),
                 "--quiet", "--set", "tensorboard=false"])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs_context(question, context) needs 'context'" in err[0], err
    assert not (app / "run" / "metrics.jsonl").exists()  # no step, no evaluation ran


MAPPED = '''
import os


def one(text):
    return text


def by_name(tone, question, task, config, extra="kept"):
    return (tone, question, task.id, config.episode_id, extra)


def positional(question, /, n=2):
    return question * n


def rollout_style(task, cfg):
    return (task.id, cfg.episode_id)


def just_the_task(task):
    return task.id


def where():
    return os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
'''


@pytest.mark.parametrize(("name", "expected"), [
    ("one", "What is 1 + 2?"),  # one input named after no column: the question
    ("by_name", ("dry", "What is 1 + 2?", "t1", "ep1", "kept")),
    ("positional", "What is 1 + 2?What is 1 + 2?"),
    ("rollout_style", ("t1", "ep1")),  # fn(task, config), whatever the second is called
    ("just_the_task", "t1"),
    ("where", ("http://gw.test:8000/v1", "k")),  # the run's gateway, without the session path
])
def test_the_task_reaches_the_apps_parameters_by_name(tmp_path, name, expected):
    from tracerl.trainers.rollouts import load_agent

    (tmp_path / "mapped.py").write_text(MAPPED)
    agent = load_agent(f"{tmp_path / 'mapped.py'}:{name}")
    task = Task(id="t1", data={"question": "What is 1 + 2?", "tone": "dry"})
    config = RolloutContext(episode_id="ep1", task=task, base_url="http://gw.test:8000/sessions/ep1/seed/3/v1",
                            model="m", api_key="k")
    before = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    assert agent.fn(task, config) == expected
    assert {k: os.environ.get(k) for k in before} == before  # put back when the call ended


def test_a_single_input_without_a_question_names_the_columns(tmp_path):
    from tracerl.trainers.rollouts import check_agent, load_agent

    (tmp_path / "mapped.py").write_text(MAPPED)
    agent = load_agent(f"{tmp_path / 'mapped.py'}:one")
    with pytest.raises(ConfigError, match=r"one\(text\) takes one input, the task's question, and task t2 has no "
                                          r"text column named 'text' or question / prompt / input; its columns are "
                                          r"\['body'\]"):
        check_agent(agent, [Task(id="t2", data={"body": "hi"})])


# -- a run nothing graded ----------------------------------------------------------------------


def test_from_traces_without_an_agent_evaluates_nothing_and_says_how_to_evaluate_the_app(tmp_path, capsys, caplog):
    pytest.importorskip("torch")
    from test_rft import _write_app_traces

    traces = tmp_path / "app.jsonl"
    _write_app_traces(traces)
    out = tmp_path / "run"
    code = main(["train", "arithmetic", "--from-traces", str(traces), "--algo", "rft", "--steps", "1",
                 "--batch-size", "2", "--eval-size", "4", "--output", str(out), "--set", "tensorboard=false"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert not ZERO.search(printed)
    assert "held-out accuracy before" not in printed  # nothing was evaluated, so nothing is shown as measured
    assert "accuracy: not measured: --from-traces without --agent evaluates nothing" in printed
    assert "--agent app.py:run --reward NAME" in printed
    assert any("--from-traces without --agent" in r.getMessage() for r in caplog.records)
    assert not [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "eval/accuracy" in r]
    assert main(["runs", "list", "--runs", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert not ZERO.search(listed)


@pytest.mark.slow
def test_the_apps_function_without_a_reward_is_not_measured_in_train_runs_list_and_diagnose(app, capsys):
    """The user's case: traces of the app, its function as --agent, no reward: every place that
    would show an accuracy says there is none."""
    pytest.importorskip("torch")
    from test_rft import _write_app_traces

    traces = app / "app.jsonl"
    _write_app_traces(traces)
    out = app / "runs" / "rft"
    code = main(["train", "--data", str(app / "tasks.jsonl"), "--holdout", "0.25", *COLUMNS,
                 "--from-traces", str(traces), "--algo", "rft", "--steps", "1", "--batch-size", "2",
                 "--eval-size", "3", "--agent", f"{app / 'app.py'}:run", "--set", "rollout.model=my-app-model",
                 "--set", "tensorboard=false", "--output", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert not ZERO.search(printed) and "mean reward" not in printed
    assert "held-out accuracy before training: not measured: none of its 3 episodes has a reward" in printed
    assert "accuracy before: not measured (no episode had a reward)" in printed
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if "eval/ungraded" in r]
    assert [r["eval/ungraded"] for r in evals] == [3.0, 3.0]
    assert not any("eval/accuracy" in r or "eval/reward_mean" in r for r in records)

    assert main(["runs", "list", "--runs", str(app / "runs")]) == 0
    listed = capsys.readouterr().out
    assert "no reward" in listed and not ZERO.search(listed)

    assert main(["diagnose", str(out)]) == 0
    diagnosed = capsys.readouterr().out
    assert "evaluation: no_reward 6" in diagnosed and "wrong_answer" not in diagnosed

    from tracerl.runs.views import RunView

    info = RunView(out).info()
    assert info["accuracy_before"] is None and info["ungraded_before"] == 3 and info["ungraded_after"] == 3
