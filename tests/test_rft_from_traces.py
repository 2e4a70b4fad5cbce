"""--from-traces on an app's own traces: held-out rows matched by question when sessions carry no
task id, re-tokenization announced (``algo.retokenize``), every episode counted and printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from spanfactory import framework_llm_span, gateway_span, reward_span

from tracerl.cli.main import main
from tracerl.core import semconv as sc
from tracerl.core.convert import episode_from_spans
from tracerl.core.store import SpanStore
from tracerl.core.types import Episode
from tracerl.tasks.data import DataConfig, load_data, question_key, rows_to_tasks, task_key
from tracerl.trainers.config import RFT
from tracerl.trainers.rft import drop_held_out, first_question, offline_episodes

pytest.importorskip("torch")
pytest.importorskip("transformers")

QUESTIONS = [f"A shop sells {i} apples and {i + 3} pears; how many fruits does it sell in total?" for i in range(24)]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from tracerl.models import tiny_model_path

    return AutoTokenizer.from_pretrained(tiny_model_path())


def _gateway_episode(i: int, question: str, reward: float | None, tokenizer: str | None = None) -> list:
    """One app episode served by a gateway (token ids), with the reward the app emitted, if any."""
    trace = f"{i + 1:032x}"
    gw = gateway_span([{"role": "user", "content": question}], "The answer is 5.", seq=0, start=1000 * i,
                      session=f"app-{i}", trace=trace)
    if tokenizer is not None:
        gw.attributes[sc.TOKENIZER] = tokenizer
    rewards = [] if reward is None else [reward_span(reward, 1000 * i + 500, session=f"app-{i}", trace=trace)]
    return [gw, *rewards]


def _text_episode(i: int, question: str, reward: float) -> list:
    """One app episode recorded without a gateway (another store): messages, no token ids."""
    trace = f"{i + 1:032x}"
    return [framework_llm_span("The answer is 5.", 1000 * i, trace=trace, question=question),
            reward_span(reward, 1000 * i + 500, session=f"app-{i}", trace=trace)]


def _app_fixture(tmp_path: Path) -> tuple[Path, Path]:
    """rows.jsonl (24 rows without an id column, a quarter held out by hash) and 16 app episodes
    with no task id: 4 asking held-out questions (whitespace changed), 2 without token ids, 2
    without rewards, 8 plain ones (two of them the same question; two reward 0)."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": q, "answer": 2 * i + 3}) + "\n" for i, q in enumerate(QUESTIONS)))
    train, held = load_data(DataConfig(path=str(rows), holdout=0.25))
    assert len(held) >= 4 and len(train) >= 11
    asked = [t.data["question"] for t in train]
    spans: list = []
    for i, task in enumerate(held[:4]):  # the app's template spaced the question out
        spans += _gateway_episode(i, "  " + task.data["question"].replace(" ", "\n ", 2) + "\n", 1.0)
    spans += _text_episode(4, asked[0], 1.0) + _text_episode(5, asked[1], 1.0)
    spans += _gateway_episode(6, asked[2], None) + _gateway_episode(7, asked[3], None)
    plain = [asked[4], asked[4], asked[5], asked[6], asked[7], asked[8], asked[9], asked[10]]
    for n, question in enumerate(plain):
        spans += _gateway_episode(8 + n, question, 0.0 if n >= 6 else 1.0)
    store = SpanStore(str(tmp_path / "app.db"))
    store.add(spans)
    traces = tmp_path / "app.jsonl"
    store.export_jsonl(traces)
    store.close()
    return rows, traces


def _train(rows: Path, traces: Path, out: Path, *extra: str) -> int:
    return main(["train", "--data", str(rows), "--holdout", "0.25", "--from-traces", str(traces), "--algo", "rft",
                 "--steps", "1", "--batch-size", "4", "--eval-size", "0", "--output", str(out), "--quiet", *extra])


def _printed(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("--from-traces ")]


def _counts(out: Path) -> dict[str, float]:
    (record,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()
                 if json.loads(line)["step"] == 1]
    return {k.removeprefix("from_traces/"): v for k, v in record.items() if k.startswith("from_traces/")}


def test_from_traces_counts_held_out_by_key_retokenized_and_unrewarded_episodes(tmp_path, caplog):
    rows, traces = _app_fixture(tmp_path)
    assert _train(rows, traces, tmp_path / "run") == 0
    where = f"--from-traces {traces}"
    assert _printed(caplog) == [
        f"{where}: 16 episodes read, 10 kept; left out 4 of 16 episodes as held out (by task id 0, by question key "
        "4, by a held-out question inside the first user message 0, evaluations 0); dropped 2 without a reward "
        "(never trained on as reward 0) and 0 without the policy's token ids (0 recorded without ids, 0 with "
        "another tokenizer's; algo.retokenize=true)",
        f"{where}: 16 episodes had no task id and were keyed by their first user message (as the data's question "
        "column), 0 had neither (nothing can match those to held-out rows); give runs a task id with "
        "tracerl.set_task(row) after each run, or tracerl.session(task=...)",
        f"{where}: re-tokenized 2 of the 10 kept episodes (2 steps; 2 recorded without token ids, 0 with another "
        "tokenizer's) with the policy's chat template, which may differ from the tokens the model saw; --set "
        "algo.retokenize=false drops them instead",
        f"{where}: training on 7 trajectories of 10 episodes, the best passing one per task and agent with reward "
        ">= 1.0 (algo.best_of_group=true)",
    ]
    assert _counts(tmp_path / "run") == {
        "episodes": 16, "evaluations": 0, "held_out_by_id": 0, "held_out_by_key": 4, "held_out_by_text": 0,
        "no_reward": 2, "no_token_ids": 0, "foreign_token_ids": 0, "kept": 10, "keyed": 16, "unkeyed": 0, "unasked_rows": 0,
        "retokenized": 2, "retokenized_foreign": 0, "retokenized_steps": 2, "excluded": 0, "trajectories": 7,
        "held_out": 4,
    }


def test_retokenize_off_drops_the_episodes_without_token_ids(tmp_path, caplog):
    rows, traces = _app_fixture(tmp_path)
    assert _train(rows, traces, tmp_path / "run", "--set", "algo.retokenize=false") == 0
    printed = _printed(caplog)
    assert printed[0].endswith(
        ": 16 episodes read, 8 kept; left out 4 of 16 episodes as held out (by task id 0, by question key 4, by a "
        "held-out question inside the first user message 0, evaluations 0); dropped 2 without a reward (never "
        "trained on as reward 0) and 2 without the policy's token ids (2 recorded without ids, 0 with another "
        "tokenizer's; algo.retokenize=false)")
    assert not any("re-tokenized" in line for line in printed)
    assert printed[-1].endswith(": training on 5 trajectories of 8 episodes, the best passing one per task and "
                                "agent with reward >= 1.0 (algo.best_of_group=true)")
    counts = _counts(tmp_path / "run")
    assert (counts["kept"], counts["no_token_ids"], counts["retokenized"], counts["trajectories"]) == (8, 2, 0, 5)


def test_the_held_out_episodes_are_the_ones_asking_held_out_rows_and_the_rest_are_keyed(tmp_path, tokenizer):
    rows, traces = _app_fixture(tmp_path)
    _, held = load_data(DataConfig(path=str(rows), holdout=0.25))
    episodes, counts = offline_episodes(traces, tokenizer, RFT(), set(), held)
    held_keys = {task_key(t) for t in held}
    assert len(episodes) == counts.kept == 10 and not held_keys & {ep.task.id for ep in episodes}
    assert all(ep.task.id == question_key(ep.task.data["question"]) for ep in episodes)
    assert len({ep.task.id for ep in episodes}) == 9  # two episodes asked one question: one group
    assert sum(s.retokenized for ep in episodes for s in ep.steps) == 2


def _asking(text: str, system: str | None = None) -> Episode:
    """An episode of one gateway call whose (first) user message is ``text``, no task id."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
    return episode_from_spans([gateway_span(messages, "5", seq=0, start=0)])


def test_a_trace_gets_the_key_of_its_data_row_whatever_the_whitespace():
    (row,) = rows_to_tasks([{"prompt": "What is the capital\tof  France?", "answer": "Paris"}], "rows",
                           columns={"question": "prompt"})
    ep = _asking("\n What is the capital of France? ")
    assert ep.task is None and first_question(ep) == "\n What is the capital of France? "
    assert task_key(row) == question_key(first_question(ep)) == question_key("What is the capital of France?")
    assert task_key(row) != question_key("What is the capital of Spain?")
    kept, left = drop_held_out([ep], set(), [row])
    assert kept == [] and left == {"by_key": 1}


def test_a_held_out_question_inside_a_template_is_held_out_when_it_has_eight_words_or_more():
    long_q, short_q = QUESTIONS[0], "What is 2 + 3?"
    rows = rows_to_tasks([{"question": long_q, "answer": 5}, {"question": short_q, "answer": 5}], "rows")

    wrapped_long = _asking(f"Answer with a number.\n\nQuestion: {long_q}", system="Be brief.")
    wrapped_short = _asking(f"Answer with a number.\n\nQuestion: {short_q}", system="Be brief.")
    other = _asking(QUESTIONS[1], system="Be brief.")
    kept, left = drop_held_out([wrapped_long, wrapped_short, other], set(), rows)
    assert left == {"by_text": 1}
    assert kept == [wrapped_short, other]  # a short question in a template is not recognised (module docstring)


def test_drop_held_out_by_task_id_and_by_an_evaluations_question():
    eval_ep = _asking("Name a prime number.").model_copy(update={"kind": "eval"})
    again = _asking("Name a  prime number.")
    (task,) = rows_to_tasks([{"id": "t9", "question": "Anything", "answer": 1}], "rows")
    by_id = _asking("Anything else").model_copy(update={"task": task})
    kept, left = drop_held_out([eval_ep, again, by_id], {"t9"})
    assert kept == [] and left == {"evaluations": 1, "by_key": 1, "by_id": 1}


def test_a_foreign_tokenizer_fingerprint_is_retokenized_and_counted(tmp_path, tokenizer):
    from tracerl.engines.base import tokenizer_fingerprint

    spans = _gateway_episode(0, QUESTIONS[0], 1.0, tokenizer="another-model-tokenizer")
    spans += _gateway_episode(1, QUESTIONS[1], 1.0)
    store = SpanStore(str(tmp_path / "t.db"))
    store.add(spans)
    store.close()
    mine = tokenizer_fingerprint(tokenizer)
    episodes, counts = offline_episodes(tmp_path / "t.db", tokenizer, RFT(), set())
    assert (counts.kept, counts.retokenized, counts.retokenized_foreign, counts.retokenized_steps) == (2, 1, 1, 1)
    foreign_ep = next(ep for ep in episodes if ep.task.data["question"] == QUESTIONS[0])
    (step,) = foreign_ep.steps
    assert step.retokenized and step.tokenizer == mine
    assert step.prompt_ids == list(tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTIONS[0]}], add_generation_prompt=True, tokenize=True, return_dict=False))
    own = next(ep for ep in episodes if ep.task.data["question"] == QUESTIONS[1])
    assert not own.steps[0].retokenized  # the policy's own ids (no fingerprint, in its vocabulary) stay
    line = counts.lines(tmp_path / "t.db", RFT())[2]
    assert "re-tokenized 1 of the 2 kept episodes (1 steps; 0 recorded without token ids, 1 with another " in line
    _, off = offline_episodes(tmp_path / "t.db", tokenizer, RFT(retokenize=False), set())
    assert (off.kept, off.foreign_token_ids, off.no_token_ids, off.retokenized) == (1, 1, 0, 0)


def test_held_out_rows_without_a_question_column_are_announced(tmp_path, tokenizer):
    rows = rows_to_tasks([{"prompt": QUESTIONS[0], "answer": 3}], "rows")  # data.columns.question not set
    store = SpanStore(str(tmp_path / "t.db"))
    store.add(_gateway_episode(0, QUESTIONS[0], 1.0))
    store.close()
    episodes, counts = offline_episodes(tmp_path / "t.db", tokenizer, RFT(), set(), rows)
    assert (counts.kept, counts.held_out, counts.unasked_rows) == (1, 0, 1)
    assert counts.lines(Path("t.db"), RFT())[2] == (
        "--from-traces t.db: 1 held-out rows have no question column, so no episode without a task id can be "
        "matched to them; name it with --set data.columns.question=COLUMN")
