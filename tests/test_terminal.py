"""The terminal environment: task folders, the work folder, the built-in agent, and a short
training run on the bundled tiny model whose shell commands show in the traces and the dashboard."""

from __future__ import annotations

import json
import re

import pytest

import tracerl
from tracerl import tasks
from tracerl.core.errors import ConfigError
from tracerl.tasks import terminal
from tracerl.tasks.terminal.agent import command_in, terminal_agent
from tracerl.tasks.terminal.environment import Workspace, check
from tracerl.testing import ScriptedServer

BUILTIN = {t.name: t for t in tasks.get("terminal").source.all()}


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_each_builtin_task_is_solved_by_its_solution_and_not_by_doing_nothing(name):
    assert check(BUILTIN[name]) == (True, False)


def test_the_builtins_cover_files_text_and_git_and_split_into_train_and_test():
    spec = tasks.get("terminal")
    assert spec.domain == "terminal" and len(BUILTIN) >= 8
    assert {"hello-file", "count-errors", "csv-total", "git-fix-typo", "git-branch"} <= set(BUILTIN)
    train = {t.data["task"] for t in spec.tasks("train", 50)}
    test = {t.data["task"] for t in spec.tasks("test", 50)}
    assert train and test and not train & test and train | test == set(BUILTIN)
    assert len(spec.tasks("train", 50)) == 50 and len(spec.tasks("test", 50)) == len(test)  # test never repeats


def test_commands_share_the_work_folder_but_not_the_task_folder():
    with Workspace(BUILTIN["git-fix-typo"]) as work:
        assert work.run("git log --oneline | wc -l").stdout.strip() == "1"  # setup.sh made the repository
        assert work.run("echo one > a.txt").ok and work.run("cat a.txt").stdout == "one\n"
        hidden = work.run("ls /tmp/task; cat $TASK_DIR/solution.sh")
        assert not hidden.ok and "sed -i" not in hidden.stdout  # the agent never sees the tests or solution
        assert work.run("exit 3").reason == "exit status 3"
        folder = work.folder
    assert folder is not None and not folder.exists()  # removed with the episode


def test_a_task_folder_is_checked_when_read(tmp_path):
    with pytest.raises(ConfigError, match="no test.sh"):
        (tmp_path / "t").mkdir()
        (tmp_path / "t" / "instruction.md").write_text("do it")
        terminal.read_task(tmp_path / "t")
    (tmp_path / "t" / "test.sh").write_text("true")
    (tmp_path / "t" / "task.yaml").write_text("split: dev\n")
    with pytest.raises(ConfigError, match="split must be train or test"):
        terminal.read_task(tmp_path / "t")
    (tmp_path / "t" / "task.yaml").write_text("timeout: 3\n")
    with pytest.raises(ConfigError, match="unknown settings"):
        terminal.read_task(tmp_path / "t")


def test_users_register_their_own_folder_of_tasks(tmp_path):
    task = tmp_path / "tasks" / "make-dir"
    task.mkdir(parents=True)
    (task / "instruction.md").write_text("Make a folder named out.")
    (task / "test.sh").write_text("[ -d out ]\n")
    (task / "solution.sh").write_text("mkdir out\n")
    (task / "task.yaml").write_text("split: train\n")
    spec = terminal.register("my-terminal", tmp_path / "tasks", replace=True)
    try:
        (t,) = spec.tasks("train", 1)
        assert spec.reward(t, "mkdir out") == 1.0 and spec.reward(t, "ls") == 0.0
        assert spec.source.solution(t) == "mkdir out\n"
    finally:
        tasks.REGISTRY.pop("my-terminal")


def test_a_reply_types_its_bash_blocks_or_its_text():
    assert command_in("I'll look first.\n```bash\nls -la\n```\nthen more") == "ls -la"
    assert command_in("```sh\ncd x\n```\n```bash\nmake\n```") == "cd x\nmake"
    assert command_in("$ grep -c ERROR app.log") == "grep -c ERROR app.log"
    assert command_in("The answer is 21.") == "The answer is 21."  # typed, as into a terminal
    assert command_in("exit") is None and command_in("  ") is None and command_in(None) is None


def _settings(server):
    return tracerl.RolloutSettings(gateway_url=server.url, model="scripted", api_key="x")


def test_the_agent_runs_text_and_tool_commands_and_the_tests_decide(tracing):
    task = next(t for t in tasks.get("terminal").tasks("train", 20) if t.data["task"] == "count-errors")
    replies = iter(["```bash\ngrep -c ERROR app.log\n```",
                    {"content": None, "tool_calls": [{"name": "shell", "arguments": {
                        "command": "grep -c ERROR app.log > errors.txt"}}]},
                    "exit"])
    with ScriptedServer(lambda messages, tools: next(replies), tracer_provider=tracing.provider) as server:
        episode = terminal_agent(task, _settings(server), tracing=tracing)
    assert episode.reward == 1.0 and episode.is_correct is True
    seen = server.requests[1]["body"]["messages"][-1]
    assert seen["role"] == "user" and seen["content"] == "$ grep -c ERROR app.log\n11\n[exit status 0]"
    assert server.requests[0]["body"]["tools"][0]["function"]["name"] == "shell"
    assert len(server.requests) == 3


def test_the_agent_scores_zero_when_the_tests_fail_and_stops_at_max_turns(tracing):
    task = next(t for t in tasks.get("terminal").tasks("train", 20) if t.data["task"] == "hello-file")
    with ScriptedServer(lambda messages, tools: "echo nope", tracer_provider=tracing.provider) as server:
        episode = terminal_agent(task, _settings(server), tracing=tracing)
    assert episode.reward == 0.0 and len(server.requests) == BUILTIN["hello-file"].max_turns


@pytest.mark.slow
def test_two_training_steps_on_the_tiny_model_show_their_shell_commands(terminal_run, capsys):
    from fastapi.testclient import TestClient

    from tracerl.cli.main import main
    from tracerl.core.store import SpanStore
    from tracerl.runs.server import Runs, create_app

    steps = [json.loads(line)["step"] for line in (terminal_run / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) == 2
    shell = [s for s in SpanStore(terminal_run / "traces.db").spans() if s.name == "execute_tool shell"]
    assert shell, "no shell command was recorded"
    command = json.loads(shell[0].attributes["gen_ai.tool.call.arguments"])["command"]
    episode = shell[0].session_id
    capsys.readouterr()
    assert main(["traces", "show", episode, "--db", str(terminal_run / "traces.db")]) == 0
    shown = capsys.readouterr().out
    assert "execute_tool shell" in shown and "tracerl.terminal.test" in shown
    # the console may wrap a span's line under the tree's guides: compare without them and spaces
    flat = re.sub(r"[\s│├└─]+", "", shown)
    assert "$" + re.sub(r"\s+", "", command.splitlines()[0])[:20] in flat
    detail = TestClient(create_app(Runs([terminal_run]))).get(f"/api/runs/run/episodes/{episode}").json()
    tools = [s for s in detail["spans"] if s["name"] == "execute_tool shell"]
    assert tools and json.loads(tools[0]["attributes"]["gen_ai.tool.call.arguments"])["command"]
    assert "gen_ai.tool.call.result" in tools[0]["attributes"]
