"""``tracerl init``: the project it writes runs as its README says, in each framework."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import tracerl
from tracerl.cli.init import FILES, Framework, render, task_rows
from tracerl.cli.main import main
from tracerl.core.store import SpanStore
from tracerl.core.types import TerminationReason
from tracerl.trainers.config import TrainConfig


def _init(tmp_path: Path, framework: str, *extra: str) -> Path:
    project = tmp_path / f"my-{framework}-agent"
    assert main(["init", str(project), "--framework", framework, *extra]) == 0
    return project


def _readme_commands(project: Path) -> list[list[str]]:
    """The commands of the README's code block, as argv lists without the leading ``tracerl``."""
    block = re.search(r"```\n(.*?)```", (project / "README.md").read_text(), re.DOTALL)
    assert block is not None
    lines = [shlex.split(line) for line in block[1].splitlines() if line.strip()]
    assert all(argv[0] == "tracerl" for argv in lines)
    return [argv[1:] for argv in lines]


def test_init_writes_a_project_and_says_what_to_run_next(tmp_path, capsys):
    project = _init(tmp_path, "litellm")
    assert sorted(p.name for p in project.iterdir()) == sorted(FILES)
    out = capsys.readouterr().out
    assert "tracerl train --config config.yaml" in out and f"cd {project}" in out
    assert _readme_commands(project) == [
        ["eval", "--data", "tasks.jsonl", "--agent", "app.py:solve", "--reward", "reward.py:grade"],
        ["train", "--config", "config.yaml"],
        ["traces", "show", "EPISODE", "--db", "runs/train/traces.db"],
    ]
    rows = [json.loads(line) for line in (project / "tasks.jsonl").read_text().splitlines()]
    assert rows == task_rows() and len({r["question"] for r in rows}) == len(rows) >= 36
    assert all(re.fullmatch(r"What is \d [-+*] \d\?", r["question"]) for r in rows)
    cfg = TrainConfig.load(project / "config.yaml")
    assert cfg.data is not None and (cfg.data.path, cfg.data.holdout) == ("tasks.jsonl", 0.2)
    assert (cfg.agent, cfg.reward, cfg.output) == ("app.py:solve", "reward.py:grade", Path("runs/train"))
    assert cfg.steps * cfg.batch_size * cfg.group_size <= 2000  # minutes on a CPU


HELPERS = {"langgraph": "config.chat_openai()", "langchain": "config.chat_openai()",
           "openai-agents": "config.async_openai_client()", "litellm": "config.litellm_kwargs()"}


@pytest.mark.parametrize("framework", [f.value for f in Framework])
def test_each_app_is_the_agent_alone(framework):
    app = render(Framework(framework), "p")["app.py"]
    compile(app, "app.py", "exec")
    assert app.count(f'tracerl.instrument("{framework}")') == 1 and "@tracerl.rollout" in app
    assert HELPERS[framework] in app  # the episode's client, from the shared pool
    assert "task.answer" not in app and "import reward" not in app  # grading is reward.py's business


def test_the_reward_is_strict(tmp_path):
    project = _init(tmp_path, "langchain")
    spec = importlib.util.spec_from_file_location("init_reward", project / "reward.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    task = tracerl.Task(id="t", data={"question": "What is 3 + 4?"}, answer=7)
    assert module.grade(task, {"answer": "3 + 4 = 7. The answer is 7."}) == 1.0
    for wrong in ("Answer: 7", "The answer is 7", "The answer is 8.", "The answer is 7. Or 8.", ""):
        assert module.grade(task, {"answer": wrong}) == 0.0, wrong


def test_init_refuses_a_non_empty_folder_unless_forced(tmp_path, capsys):
    project = tmp_path / "taken"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    assert main(["init", str(project)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not empty" in err[0] and "--force" in err[0], err
    assert [p.name for p in project.iterdir()] == ["notes.txt"]
    assert main(["init", str(project), "--force"]) == 0
    assert (project / "notes.txt").read_text() == "mine" and (project / "app.py").is_file()


def test_init_refuses_an_unknown_framework_listing_the_choices(tmp_path, capsys):
    assert main(["init", str(tmp_path / "p"), "--framework", "crewai"]) == 2
    err = capsys.readouterr().err
    assert "--framework" in err and "crewai" in err
    assert all(f.value in err for f in Framework)
    assert not (tmp_path / "p").exists()


@pytest.mark.slow
@pytest.mark.parametrize("framework", [f.value for f in Framework])
def test_the_readme_eval_runs_in_each_framework(tmp_path, monkeypatch, framework):
    project = _init(tmp_path, framework)
    monkeypatch.chdir(project)  # as a user runs it: from the project folder
    evaluate = _readme_commands(project)[0]
    # An absolute --output: this process's span stores are keyed by their path as given, so a
    # second relative runs/eval/traces.db in another folder would be read from the first one.
    assert main([*evaluate, "--output", str(project / "runs/eval")]) == 0
    episodes = [tracerl.Episode.model_validate_json(line)
                for line in (project / "runs/eval/episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == len(task_rows())
    assert all(ep.termination_reason is TerminationReason.SUCCESS for ep in episodes), \
        [ep.error for ep in episodes if ep.error][:1]
    assert all(ep.reward in (0.0, 1.0) and ep.steps for ep in episodes)
    assert all(isinstance(ep.artifacts.get("answer"), str) for ep in episodes)


@pytest.mark.slow
def test_the_readme_train_and_traces_show_run(tmp_path):
    """As a user runs them: the commands in a fresh process, from the project folder."""
    project = _init(tmp_path, "langgraph")
    _, train, show = _readme_commands(project)
    tiny = ["--set", "steps=2", "--batch-size", "4", "--group-size", "4", "--eval-size", "4", "--quiet"]
    _tracerl(project, *train, *tiny)
    metrics = [json.loads(line) for line in (project / "runs/train/metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "rollout/reward_mean" in m] == [1, 2]
    with SpanStore(project / "runs/train/traces.db") as store:
        ids = [s.session_id for s in store.sessions(limit=1000) if s.llm_calls]
    assert len(ids) >= 2 * 4 * 4
    listed = _tracerl(project, "traces", "list", "--db", "runs/train/traces.db", "--limit", "3")
    assert sum(i in listed for i in ids) == 3  # the ids `traces show` takes
    shown = _tracerl(project, *[ids[0] if a == "EPISODE" else a for a in show])
    assert f"episode {ids[0]}" in shown and "success" in shown


def _tracerl(cwd: Path, *argv: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "tracerl", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("framework", [f.value for f in Framework])
def test_production_runs_the_app_as_one_episode_per_question_with_its_reward_and_task(tmp_path, framework,
                                                                                      tiny_engine):
    """README's other loop, in each framework: ``python production.py`` against a gateway, no
    tracerl session in the app; each run is one episode carrying its row's task and reward."""
    from tracerl.core.convert import episodes_from_store

    project = _init(tmp_path, framework)
    rows = task_rows()[:6]
    (project / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    home = tmp_path / "home"
    home.mkdir()
    with tracerl.GatewayServer(tiny_engine, SpanStore(home / "traces.db")) as gw:
        proc = subprocess.run([sys.executable, "production.py"], cwd=project, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "TRACERL_HOME": str(home),
                                                "OPENAI_BASE_URL": gw.url + "/v1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "6 runs of the app recorded" in proc.stdout
    episodes = episodes_from_store(SpanStore(home / "traces.db"))
    assert sorted(ep.task.id for ep in episodes if ep.task) == sorted(r["id"] for r in rows)
    assert all(ep.reward in (0.0, 1.0) and ep.steps and all(s.has_tokens for s in ep.steps) for ep in episodes)
    with SpanStore(home / "traces.db") as store:
        assert {s.service for s in store.services()} >= {project.name}
