"""Numbers a user can trust, tried as a new user would: their own app's answers, their own data
and their own reward. Accuracy means correct (never "reward > 0"), a reward function that
cannot grade stops the command instead of passing silently, held-out tasks stay out of
fine-tuning, and the data's split does not move when the file gains a column."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

import tracerl
from tracerl.cli.main import main
from tracerl.testing import ScriptedServer

APP = '''
import tracerl


@tracerl.rollout(timeout_s=60)
def solve(task, config):
    client = config.openai_client()
    reply = client.chat.completions.create(model=config.model, **config.sampling, messages=[
        {"role": "user", "content": task.data["question"]}])
    return reply.choices[0].message.content or ""
'''
REWARDS = '''
CALLS = []


def partial(task, artifacts):
    """Shaped: 1 for the right answer, 0.1 for any other (it answered at all)."""
    return 1.0 if artifacts["answer"].strip().endswith(f"The answer is {task.answer}.") else 0.1


def by_position(task, ep):
    """Both ways of reading the second argument, under a name the old rule did not know."""
    assert len(ep.steps) == 1 and ep.steps[0].response_ids
    return float(ep["answer"].endswith(f"The answer is {task.answer}."))


def says_yes(task, artifacts):
    return "yes"


def first_only(task, artifacts):
    """Grades the first episode it sees, then breaks: the check before step 1 passes."""
    CALLS.append(task.id)
    if len(CALLS) > 1:
        raise ValueError("the grader lost its connection")
    return 1.0
'''


def _rows(n: int = 40) -> list[dict]:
    return [{"question": f"What is {a} + {b}?", "answer": a + b} for a in range(n // 8) for b in range(8)]


@pytest.fixture
def project(tmp_path):
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "rewards.py").write_text(REWARDS)
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    return tmp_path


def _right_for_even_sums(messages, tools):
    a, b = map(int, re.findall(r"\d+", messages[-1]["content"]))
    return f"The answer is {a + b if (a + b) % 2 == 0 else a + b + 1}."


def _episodes(folder: Path) -> list[tracerl.Episode]:
    return [tracerl.Episode.model_validate_json(x) for x in (folder / "episodes.jsonl").read_text().splitlines()]


def _eval(project: Path, reward: str, *extra: str) -> int:
    with ScriptedServer(_right_for_even_sums) as server:
        return main(["eval", "--data", str(project / "tasks.jsonl"), "--agent", f"{project / 'app.py'}:solve",
                     "--reward", f"{project / 'rewards.py'}:{reward}", "--base-url", server.url,
                     "--output", str(project / "eval"), *extra])


# -- accuracy means correct -----------------------------------------------------------------


def test_a_partial_credit_reward_gives_the_share_of_right_answers_not_of_rewarded_ones(project, capsys):
    assert _eval(project, "partial") == 0
    out = capsys.readouterr().out
    episodes = _episodes(project / "eval")
    right = sum(ep.reward == 1.0 for ep in episodes)
    assert 0 < right < len(episodes) and all(ep.reward in (0.1, 1.0) for ep in episodes)
    report = json.loads((project / "eval" / "report.json").read_text())
    assert report["accuracy"] == pytest.approx(right / len(episodes))  # "reward > 0" said 100 %
    assert report["accuracy_rule"] == "correct = reward >= 1" and report["judged_by_reward_max"] == len(episodes)
    assert report["reward_mean"] == pytest.approx((right + 0.1 * (len(episodes) - right)) / len(episodes))
    assert "accuracy (correct = reward >= 1)" in out and f"{right / len(episodes):.1%}" in out
    # the declared best reward moves the rule, never the observed maximum
    assert _eval(project, "partial", "--reward-max", "0.1") == 0
    assert json.loads((project / "eval" / "report.json").read_text())["accuracy"] == 1.0


def test_is_correct_from_the_reward_wins_and_no_rule_is_printed(project, capsys):
    (project / "rewards.py").write_text(REWARDS + '''
def told(task, artifacts):
    ok = artifacts["answer"].strip().endswith(f"The answer is {task.answer}.")
    return {"reward": 1.0 if ok else 0.1, "is_correct": ok}
''')
    assert _eval(project, "told") == 0
    report = json.loads((project / "eval" / "report.json").read_text())
    episodes = _episodes(project / "eval")
    assert report["accuracy"] == pytest.approx(sum(bool(ep.is_correct) for ep in episodes) / len(episodes))
    assert report["accuracy_rule"] == "is_correct" and "reward >=" not in capsys.readouterr().out


def test_a_reward_reads_the_episode_and_its_artifacts_under_any_parameter_name(project):
    assert _eval(project, "by_position") == 0
    episodes = _episodes(project / "eval")
    assert all(ep.termination_reason.value == "success" for ep in episodes)  # no grading_error
    assert {ep.reward for ep in episodes} == {0.0, 1.0}


def test_the_graded_episode_is_an_episode_and_a_mapping_of_its_artifacts():
    from collections.abc import Mapping

    from tracerl.core.grading import GradedEpisode

    ep = GradedEpisode.of(tracerl.Episode(id="e", artifacts={"answer": "7", "n": 2}))
    assert isinstance(ep, tracerl.Episode) and isinstance(ep, Mapping)
    assert ep["answer"] == "7" and ep.get("missing", "x") == "x" and "n" in ep and len(ep) == 2
    assert dict(ep) == {"answer": "7", "n": 2} and sorted(ep) == ["answer", "n"] and ep.steps == []
    assert {**ep} == ep.artifacts and list(ep.items()) == [("answer", "7"), ("n", 2)]


# -- loud grading failures ------------------------------------------------------------------


def test_eval_with_a_reward_that_returns_a_string_exits_1_naming_the_error_and_episode(project, capsys):
    assert _eval(project, "says_yes", "--max-examples", "4") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "4 of 4 episodes could not be graded" in err[0] and "returned 'yes' (a str)" in err[0]
    first = _episodes(project / "eval")[0]
    assert f"episode {first.id}" in err[0] and first.termination_reason.value == "grading_error"
    # the report is still written: nothing of the run is lost
    assert json.loads((project / "eval" / "report.json").read_text())["termination_reasons"] == {"grading_error": 4}


def test_eval_tolerates_grading_errors_up_to_the_set_share(project):
    (project / "rewards.py").write_text(REWARDS + '''
def flaky(task, artifacts):
    if task.answer == 0:
        raise KeyError("score")
    return 1.0
''')
    # 1 of the 40 tasks (0 + 0) cannot be graded: 2.5 % is under the default 10 %, not under 2 %
    assert _eval(project, "flaky") == 0
    assert _eval(project, "flaky", "--max-grading-errors", "0.02") == 1


def _train(project: Path, out: Path, reward: str, *extra: str) -> int:
    return main(["train", "--data", str(project / "tasks.jsonl"), "--holdout", "0.3",
                 "--agent", f"{project / 'app.py'}:solve", "--reward", f"{project / 'rewards.py'}:{reward}",
                 "--steps", "2", "--batch-size", "2", "--group-size", "2", "--set", "rollout.max_tokens=12",
                 "--output", str(out), "--quiet", *extra])


@pytest.mark.slow
def test_train_with_a_reward_that_cannot_run_stops_before_any_update(project, capsys):
    out = project / "run"
    assert _train(project, out, "says_yes") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("tracerl: error: the reward function failed on the first episode"), err
    assert "returned 'yes'" in err[-1] and "-s0-t0-g0" in err[-1] and "before any training" in err[-1]
    assert not out.exists()  # a failed preflight is not a run: no folder (tests/test_train_preflight.py)


@pytest.mark.slow
def test_train_stops_at_the_step_whose_episodes_cannot_be_graded(project, capsys):
    out = project / "run"
    assert _train(project, out, "first_only", "--eval-size", "0") == 1
    err = capsys.readouterr().err.strip().splitlines()
    # the first episode, graded before step 1, is step 1's first rollout: 3 of its 4 fail
    assert err[-1].startswith("tracerl: error: step 1: 3 of 4 episodes could not be graded"), err
    assert "ValueError: the grader lost its connection" in err[-1]
    assert not (out / "checkpoints").exists()


# -- a whole run: accuracy, its rule and mean reward everywhere; held-out stays held out -----


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory):
    """A real run on the bundled model with the partial-credit reward (module-scoped: slow)."""
    project = tmp_path_factory.mktemp("trust")
    (project / "app.py").write_text(APP)
    (project / "rewards.py").write_text(REWARDS)
    (project / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows(80)))
    out = project / "runs" / "partial"
    code = main(["train", "--data", str(project / "tasks.jsonl"), "--holdout", "0.25",
                 "--agent", f"{project / 'app.py'}:solve", "--reward", f"{project / 'rewards.py'}:partial",
                 "--steps", "2", "--batch-size", "4", "--group-size", "2", "--eval-size", "12",
                 "--set", "rollout.max_tokens=12", "--output", str(out), "--quiet"])
    assert code == 0
    return project, out


def _store_episodes(db: Path) -> list[tracerl.Episode]:
    from tracerl.core.convert import episodes_from_store
    from tracerl.core.store import SpanStore

    with SpanStore(db, read_only=True) as store:
        return episodes_from_store(store)


@pytest.mark.slow
def test_train_counts_right_answers_and_says_how_everywhere_it_prints_accuracy(partial_run, capsys):
    project, out = partial_run
    evals = [ep for ep in _store_episodes(out / "traces.db") if ep.kind == "eval"]
    before = [ep for ep in evals if "-eval0-" in ep.id]
    assert len(before) == 12 and all(ep.reward in (0.1, 1.0) for ep in before)
    right = sum(ep.reward == 1.0 for ep in before) / len(before)
    assert right < 1.0  # the bundled model gets some wrong: "reward > 0" would have said 100 %
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    step0 = next(r for r in records if r["step"] == 0 and "eval/accuracy" in r)
    assert step0["eval/accuracy"] == pytest.approx(right) and step0["eval/judged_by_reward_max"] == 12
    assert step0["eval/reward_mean"] == pytest.approx(sum(ep.reward for ep in before) / 12)

    assert main(["runs", "list", "--runs", str(project / "runs")]) == 0
    listed = capsys.readouterr().out
    assert "correct = reward >= 1" in listed and f"{step0['eval/reward_mean']:.3f}" in listed

    from tracerl.runs.views import RunView

    info = RunView(out).info()
    assert info["accuracy_rule"] == "correct = reward >= 1" and info["accuracy_before"] == pytest.approx(right)
    assert info["reward_before"] == pytest.approx(step0["eval/reward_mean"]) and info["reward_after"] is not None

    assert main(["runs", "compare", str(out), str(out)]) == 0
    assert "accuracy counted by" in capsys.readouterr().out
    held = set(json.loads((out / "heldout.json").read_text())["task_ids"])
    from tracerl.tasks import DataConfig, from_data

    split = from_data(DataConfig(path=str(project / "tasks.jsonl"), holdout=0.25))
    assert held == {t.id for t in split.source.test} and {ep.task.id for ep in evals} < held  # 12 of them evaluated


def _offline(caplog) -> tuple[int, int]:
    """(episodes left out, trajectories trained on), as --from-traces reported them."""
    text = " ".join(r.getMessage() for r in caplog.records)
    left = re.search(r"left out (\d+) of \d+ episodes", text)
    kept = re.search(r"training on (\d+) trajectories", text)
    assert kept is not None, text
    return (int(left[1]) if left else 0), int(kept[1])


@pytest.mark.slow
@pytest.mark.parametrize("source", ["traces.db", "export.jsonl"])
def test_fine_tuning_on_a_runs_own_traces_never_trains_on_its_held_out_tasks(partial_run, tmp_path, caplog, source):
    project, out = partial_run
    traces = out / "traces.db"
    if source == "export.jsonl":  # exported, away from the run folder and its heldout.json
        traces = tmp_path / "export.jsonl"
        assert main(["traces", "export", str(traces), "--db", str(out / "traces.db")]) == 0
    episodes = _store_episodes(out / "traces.db")
    heldout = {ep.task.id for ep in episodes if ep.kind == "eval"}
    trainable = [ep for ep in episodes if ep.kind != "eval"]
    assert heldout and not heldout & {ep.task.id for ep in trainable}
    expected = {ep.task.id for ep in trainable if ep.reward is not None and ep.reward >= 0.1}
    code = main(["train", "--data", str(project / "tasks.jsonl"), "--holdout", "0.25", "--from-traces", str(traces),
                 "--algo", "rft", "--min-reward", "0.1", "--steps", "1", "--eval-size", "4",
                 "--output", str(tmp_path / "rft"), "--quiet"])
    assert code == 0
    left_out, kept = _offline(caplog)
    assert left_out == len(episodes) - len(trainable)  # every evaluation episode, before and after
    assert kept == len(expected)  # the best passing trajectory of each training task (algo.best_of_group)


def test_drop_held_out_leaves_out_evaluations_and_held_out_tasks():
    from tracerl.trainers.rft import drop_held_out

    def ep(i: str, task: str, kind: str | None) -> tracerl.Episode:
        return tracerl.Episode(id=i, task=tracerl.Task(id=task), kind=kind)

    episodes = [ep("a", "t1", "train"), ep("b", "t2", "eval"), ep("c", "t2", None), ep("d", "t3", None),
                ep("e", "t4", "train")]
    kept, dropped = drop_held_out(episodes, {"t3"})
    assert [e.id for e in kept] == ["a", "e"] and dropped == {"evaluations": 1, "by_id": 2}


# -- exports, data settings -----------------------------------------------------------------


def test_exporting_nothing_says_where_runs_keep_their_spans_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "demo").mkdir(parents=True)
    sqlite3.connect(tmp_path / "runs" / "demo" / "traces.db").close()
    (tmp_path / "old.jsonl").write_text("kept\n")
    assert main(["traces", "export", "old.jsonl"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no spans in" in err[0] and "RUN/traces.db" in err[0]
    assert "runs/demo/traces.db" in err[0] and "--db" in err[0]
    assert (tmp_path / "old.jsonl").read_text() == "kept\n"  # an earlier export is not truncated
    assert main(["traces", "export", "new.jsonl"]) == 1 and not (tmp_path / "new.jsonl").exists()


def test_an_empty_csv_cell_is_refused_with_its_rows(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("prompt,solution\nWhat is 1+1?,2\nWhat is 2+2?,\n,6\nWhat is 4+4?,\n")
    code = main(["eval", "--data", str(tmp_path / "t.csv"), "--set", "data.columns.question=prompt",
                 "--set", "data.answer=solution", "--reward", "numeric", "--output", str(tmp_path / "e")])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert str(tmp_path / "t.csv") in err[0] and "column solution is empty in rows 2, 4" in err[0]
    assert "other empty columns: prompt (read as question)" in err[0]


def test_a_column_mapping_written_backwards_says_which_side_is_which(tmp_path, capsys):
    (tmp_path / "t.jsonl").write_text(json.dumps({"question": "What is 1+1?", "answer": 2}) + "\n")
    assert main(["eval", "--data", str(tmp_path / "t.jsonl"), "--set", "data.columns.question=prompt",
                 "--output", str(tmp_path / "e")]) == 1
    err = capsys.readouterr().err
    assert "no column 'prompt' (mapped to 'question')" in err and "--set data.columns.prompt=question" in err


def test_a_new_column_moves_no_row_between_splits_but_another_id_column_does():
    from tracerl.tasks.data import DataConfig, rows_to_tasks, split_tasks

    rows = [{"question": f"What is {i} * 3?", "answer": 3 * i, "ref": f"r{i:03d}"} for i in range(200)]
    cfg = DataConfig(path="rows", holdout=0.2)

    def held(rows: list[dict], **options) -> set[str]:
        tasks = rows_to_tasks(rows, "rows", **options)
        return {t.data["question"] for t in split_tasks(tasks, cfg)[1]}

    base = held(rows)
    assert 20 < len(base) < 60
    assert held([{**r, "source": "import-2"} for r in rows]) == base  # the raw-row hash moved every row
    by_ref = held(rows, id="ref")
    assert by_ref != base and held([{**r, "source": "x"} for r in rows], id="ref") == by_ref


def test_the_same_question_and_answer_twice_without_an_id_names_data_id():
    from tracerl.core.errors import ConfigError
    from tracerl.tasks.data import rows_to_tasks

    with pytest.raises(ConfigError, match=r"rows 1 and 2 have the same question and answer .*--set data.id=COLUMN"):
        rows_to_tasks([{"question": "q", "answer": 1, "context": "a"}, {"question": "q", "answer": 1, "context": "b"}],
                      "rows")


def test_dry_run_with_data_shows_the_data_not_a_builtin_task(tmp_path, capsys):
    assert main(["train", "--data", "tasks.jsonl", "--holdout", "0.2", "--set", "data.id=ref", "--dry-run"]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["task"] == "data" and cfg["data"]["path"] == "tasks.jsonl" and cfg["data"]["id"] == "ref"
    assert main(["train", "gsm8k", "--data", "tasks.jsonl", "--dry-run"]) == 1
    assert "TASK 'gsm8k' and --data tasks.jsonl both say what to run on" in capsys.readouterr().err


def test_a_config_files_task_is_not_overridden_by_the_default(tmp_path, capsys):
    (tmp_path / "run.yaml").write_text("task: countdown\n")
    assert main(["train", "--config", str(tmp_path / "run.yaml"), "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["task"] == "countdown"


def test_the_data_modules_docstring_runs():
    import doctest

    import tracerl.tasks.data

    result = doctest.testmod(tracerl.tasks.data)
    assert result.attempted >= 6 and result.failed == 0


def test_eval_marks_held_out_episodes_eval_and_training_tasks_train(project):
    """A teacher's traces collected on training tasks (--split train) may be trained on later;
    an evaluation on held-out tasks never is."""
    assert _eval(project, "partial", "--holdout", "0.25") == 0
    held = _episodes(project / "eval")
    assert held and {ep.kind for ep in held} == {"eval"}
    assert _eval(project, "partial", "--holdout", "0.25", "--split", "train") == 0
    train = _episodes(project / "eval")
    assert train and {ep.kind for ep in train} == {"train"}
    assert not {ep.task.id for ep in held} & {ep.task.id for ep in train}


def test_a_second_eval_into_the_same_folder_keeps_each_runs_episodes_apart(project):
    """Their traces.db accumulates; the same episode ids would have merged two runs' spans."""
    from tracerl.core.store import SpanStore

    assert _eval(project, "partial", "--max-examples", "4") == 0
    first = {ep.id for ep in _episodes(project / "eval")}
    assert _eval(project, "partial", "--max-examples", "4") == 0
    second = _episodes(project / "eval")
    assert not first & {ep.id for ep in second} and all(len(ep.steps) == 1 for ep in second)
    with SpanStore(project / "eval" / "traces.db", read_only=True) as store:
        assert len(store.sessions(limit=100)) == 8


def test_eval_keeps_the_apps_own_timeout_unless_told_otherwise(project, monkeypatch):
    """An app's @tracerl.rollout(timeout_s=...) is its author's word; --timeout overrides it."""
    from tracerl.core import rollout_fn as rollout

    seen: list[float | None] = []
    real = rollout.RolloutFunction._timeout
    monkeypatch.setattr(rollout.RolloutFunction, "_timeout", lambda self, s: seen.append(real(self, s)) or seen[-1])
    assert _eval(project, "partial", "--max-examples", "2") == 0
    assert set(seen) == {60}  # APP says timeout_s=60
    seen.clear()
    assert _eval(project, "partial", "--max-examples", "2", "--timeout", "900") == 0
    assert set(seen) == {900}
