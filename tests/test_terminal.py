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
    with pytest.raises(ConfigError, match="split: Input should be 'train' or 'test'"):
        terminal.read_task(tmp_path / "t")
    (tmp_path / "t" / "task.yaml").write_text("timeout: 3\n")
    with pytest.raises(ConfigError, match="timeout: unknown setting"):
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


def _task_folder(root, name="make-dir", test="[ -d out ]\n", solution="mkdir out\n", setup=None, settings="split: train\n"):
    task = root / name
    task.mkdir(parents=True)
    (task / "instruction.md").write_text("Make a folder named out.")
    (task / "test.sh").write_text(test)
    (task / "solution.sh").write_text(solution)
    (task / "task.yaml").write_text(settings)
    if setup is not None:
        (task / "setup.sh").write_text(setup)
    return task


def test_the_agent_cannot_read_or_run_its_tasks_tests_or_solution_outside_a_hidden_folder():
    import os
    import shutil
    import sysconfig
    import tempfile

    # the attacker's case: a task folder the sandbox would otherwise show, where an installed
    # package's tasks live (site-packages is bound for the interpreter)
    try:
        root = tempfile.mkdtemp(prefix="tracerl-test-tasks-", dir=sysconfig.get_paths()["purelib"])
    except OSError:
        pytest.skip("site-packages is not writable here")
    os.chmod(root, 0o755)  # as an installed package's folders are: readable by every user
    try:
        from pathlib import Path

        task = terminal.read_task(_task_folder(Path(root) / "tasks", test="[ -d out ] && echo PASSMARK\n"))
        terminal.register("exposed-terminal", Path(root) / "tasks", replace=True)
        for spec in (task, BUILTIN["hello-file"]):  # a user's task, and one inside the installed package
            with Workspace(spec) as work:
                tests = work.run(f"cat {spec.folder}/test.sh")
                assert not tests.ok and "PASSMARK" not in tests.stdout and "Hello" not in tests.stdout
                assert not work.run(f"bash {spec.folder}/solution.sh").ok
                listed = work.run(f"ls -AR {spec.folder.parent}").stdout  # its own folder, and its siblings
                assert "test.sh" not in listed and "solution.sh" not in listed and "instruction.md" not in listed
                found = work.run("find / -name solution.sh -readable 2>/dev/null; find / -name test.sh "
                                 "-path '*/hello-file/*' 2>/dev/null")
                assert found.stdout == ""
                assert not work.test().ok  # running its own solution.sh did nothing
        with Workspace(task) as work:  # the honest solution still passes
            assert work.run("mkdir out").ok and work.test().ok
    finally:
        tasks.REGISTRY.pop("exposed-terminal", None)
        shutil.rmtree(root)


def test_without_bubblewrap_terminal_and_code_tasks_are_refused_unless_the_risk_is_accepted(monkeypatch, capsys):
    from tracerl.cli.main import main
    from tracerl.tasks import isolation
    from tracerl.tasks.sandbox import Limits

    monkeypatch.setattr(isolation, "available", lambda: False)
    monkeypatch.delenv("TRACERL_ALLOW_UNSANDBOXED", raising=False)
    with pytest.raises(ConfigError, match="bubblewrap does not run here.*--allow-unsandboxed"):
        Workspace(BUILTIN["hello-file"])
    for command in (["eval", "humaneval"], ["train", "terminal", "--dry-run"]):
        assert main(command) == 1
        said = capsys.readouterr().err.strip()
        assert len(said.splitlines()) == 1 and "would run on this machine" in said and "--allow-unsandboxed" in said
    assert main(["train", "terminal", "--dry-run", "--allow-unsandboxed"]) == 0
    assert Workspace(BUILTIN["hello-file"]).boundary is False  # accepted: TRACERL_ALLOW_UNSANDBOXED=1
    monkeypatch.delenv("TRACERL_ALLOW_UNSANDBOXED")
    assert Workspace(BUILTIN["hello-file"], Limits(boundary=False)).boundary is False  # code's own opt-in


def test_tasks_check_terminal_runs_each_solution_and_names_a_task_that_passes_by_doing_nothing(tmp_path, capsys):
    from tracerl.cli.main import main

    _task_folder(tmp_path / "mine", "good")
    _task_folder(tmp_path / "mine", "lax", test="true\n")
    assert main(["tasks", "check", "terminal", "--path", str(tmp_path / "mine")]) == 1
    out = capsys.readouterr().out
    assert "2 tasks; 1 solved by their solution.sh" in out and "lax: test.sh passes after doing nothing" in out
    assert main(["tasks", "check", "terminal", "--split", "test"]) == 0  # the built-ins: no 'rows' crash
    assert "solved by their solution.sh and not by doing nothing" in capsys.readouterr().out


def test_a_failing_or_hanging_setup_leaves_no_folder_behind(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))
    (tmp_path / "temp").mkdir()
    failing = terminal.read_task(_task_folder(tmp_path, "fails", setup="echo broken; exit 3\n"))
    hanging = terminal.read_task(_task_folder(tmp_path, "hangs", setup="sleep 30\n", settings="test_timeout_s: 1\n"))
    with pytest.raises(ConfigError, match="setup.sh failed \\(exit status 3\\): broken"):
        Workspace(failing).__enter__()
    with pytest.raises(ConfigError, match="setup.sh failed \\(timeout after 1.0 s\\)"), Workspace(hanging):
        pass
    assert list((tmp_path / "temp").iterdir()) == []


@pytest.mark.parametrize(("text", "said"), [
    ("max_turns: ten\n", "max_turns: Input should be a valid integer"),
    ('test_timeout_s: "5"\n', "test_timeout_s: Input should be a valid number"),
    ("max_turns: 0\n", "max_turns: Input should be greater than or equal to 1"),
    ("command_timeout_s: -1\n", "command_timeout_s: Input should be greater than 0"),
    ("test_timeout_s: 0\n", "test_timeout_s: Input should be greater than 0"),
    ("split: dev\n", "split: Input should be 'train' or 'test'"),
    ("timeout: 3\n", "timeout: unknown setting (known: split, max_turns"),
    ("max_turns: [4\n", "not valid YAML at line 2"),
    ("- 4\n", "must be a mapping of settings"),
])
def test_task_yaml_is_validated_in_one_line_naming_the_file_and_the_key(tmp_path, text, said):
    folder = _task_folder(tmp_path, settings=text)
    with pytest.raises(ConfigError) as caught:
        terminal.read_task(folder)
    message = str(caught.value)
    assert message.startswith(f"terminal task {folder / 'task.yaml'}: ") and said in message
    assert "\n" not in message


def test_a_test_sh_timeout_scores_zero_and_says_so_in_the_episode_and_its_span(tmp_path, tracing):
    from tracerl.core.store import SpanStore
    from tracerl.core.types import TerminationReason

    _task_folder(tmp_path / "slow", test="sleep 30\n", settings="split: train\ntest_timeout_s: 1\n")
    spec = terminal.register("slow-terminal", tmp_path / "slow", replace=True)
    try:
        (task,) = spec.tasks("train", 1)
        with ScriptedServer(lambda messages, tools: "exit", tracer_provider=tracing.provider) as server:
            episode = terminal_agent(task, _settings(server), tracing=tracing)
    finally:
        tasks.REGISTRY.pop("slow-terminal")
    assert episode.reward == 0.0 and episode.termination_reason is TerminationReason.TIMEOUT
    assert "test.sh of make-dir ran past its test_timeout_s (timeout after 1.0 s); scored 0" in (episode.error or "")
    tracing.provider.force_flush()
    (span,) = [s for s in SpanStore(tmp_path / "spans.db").spans() if s.name == "tracerl.terminal.test"]
    assert span.status_code == "ERROR" and "timeout after 1.0 s" in (span.status_message or "")
    assert span.attributes["tracerl.shell.reason"] == "timeout after 1.0 s"


AGENT_THAT_REGISTERS = '''
from pathlib import Path

from tracerl.tasks import terminal
from tracerl.tasks.terminal.agent import terminal_agent

terminal.register("agent-registered", Path(__file__).parent / "tasks", replace=True)
agent = terminal_agent
'''


def test_a_task_registered_by_the_agent_module_is_known_to_the_cli_and_dry_run_looks_names_up(tmp_path, capsys):
    from tracerl.cli.main import main

    _task_folder(tmp_path / "tasks")
    (tmp_path / "my_agent.py").write_text(AGENT_THAT_REGISTERS)
    try:
        assert main(["train", "agent-registered", "--agent", f"{tmp_path / 'my_agent.py'}:agent", "--dry-run"]) == 0
        assert '"task": "agent-registered"' in capsys.readouterr().out
    finally:
        tasks.REGISTRY.pop("agent-registered", None)
    assert main(["train", "no-such-task", "--dry-run"]) == 1
    assert "unknown task 'no-such-task'" in capsys.readouterr().err
    assert main(["train", "arithmetic", "--eval-task", "no-such-eval", "--dry-run"]) == 1
    assert "unknown task 'no-such-eval'" in capsys.readouterr().err
