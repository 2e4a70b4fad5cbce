"""``tracerl diagnose``: each way an episode can go without reward has its class, taken from the
termination reason, the spans and the grader's report, never from the reply's text."""

from __future__ import annotations

import pytest

from tracerl.cli.main import main
from tracerl.core.spans import SpanRecord
from tracerl.core.types import Episode, Message, Step, TerminationReason, Trajectory
from tracerl.runs.diagnose import CAUSES, classify, diagnose

T = TerminationReason


def episode(id_: str = "r-s0-t0-g0", reward: float | None = 0.0, end: T = T.SUCCESS, error: str | None = None,
            finish: str = "stop", rewards: dict | None = None, breaks: int = 0) -> Episode:
    step = Step(id="a", output_message=Message(role="assistant", content="The answer is 7."), finish_reason=finish,
                prompt_ids=[1, 2], response_ids=[3])
    return Episode(id=id_, reward=reward, termination_reason=end, error=error, rewards=rewards or {},
                   trajectories=[Trajectory(steps=[step], reward=reward, prefix_breaks=breaks)])


def tool_span(status: str) -> SpanRecord:
    return SpanRecord("t", "s1", None, "execute_tool calculator", 0, 1,
                      attributes={"gen_ai.operation.name": "execute_tool"}, status_code=status,
                      status_message="ZeroDivisionError: division by zero")


@pytest.mark.parametrize(("ep", "spans", "code", "detail"), [
    (episode(end=T.ERROR, error="Traceback ...\nRuntimeError: boom"), [], "agent_error", "RuntimeError: boom"),
    (episode(end=T.TIMEOUT, error="rollout exceeded 60s"), [], "timeout", "rollout exceeded 60s"),
    (episode(end=T.CANCELLED), [], "cancelled", None),
    (episode(end=T.GRADING_ERROR, error="GradingError: task has no answer"), [], "grading_error",
     "GradingError: task has no answer"),
    (episode(end=T.MISSING_TOKEN_IDS), [], "missing_token_ids", None),
    (episode(end=T.NO_LLM_CALLS), [], "no_llm_calls", None),
    (episode(), [tool_span("ERROR")], "tool_error", "execute_tool calculator: ZeroDivisionError: division by zero"),
    (episode(end=T.TRUNCATED, finish="length"), [], "truncated", None),
    (episode(finish="length"), [], "truncated", None),  # the last reply was cut, whatever the agent said
    (episode(end=T.MAX_TURNS), [], "max_turns", None),
    (episode(rewards={"reward": 0.0, "answer_found": 0.0}), [], "format", None),
    (episode(rewards={"reward": 0.0, "answer_found": 1.0}), [tool_span("OK")], "wrong_answer", None),
    (episode(), [], "wrong_answer", None),  # the grader said nothing more: the honest class
])
def test_each_cause_has_its_class(ep, spans, code, detail):
    cause = classify(ep, spans)
    assert (cause.code, cause.detail) == (code, detail)
    assert cause.kind == ("infrastructure" if code in ("agent_error", "timeout", "cancelled", "grading_error",
                                                        "missing_token_ids", "no_llm_calls") else "policy")


def test_a_run_is_counted_per_cause_per_step_with_groups_exclusions_and_prefix_breaks():
    items = [
        (episode("r-s0-t0-g0", 1.0), []), (episode("r-s0-t0-g1", 0.0, rewards={"answer_found": 0.0}), []),
        (episode("r-s0-t1-g0", 0.0), []), (episode("r-s0-t1-g1", 0.0, breaks=1), []),  # a flat group
        (episode("r-s1-t0-g0", 0.0, end=T.ERROR, error="ValueError: x"), []), (episode("r-s1-t0-g1", 1.0), []),
        (episode("r-eval1-t0-n0", 0.0), []),
    ]
    d = diagnose(items, {"exclude": ["error"], "drop_zero_variance": True})
    assert (d.episodes, d.unrewarded, d.eval_episodes) == (6, 4, 1)
    assert d.causes == {"format": 1, "wrong_answer": 2, "agent_error": 1}
    assert d.by_step == {1: {"format": 1, "wrong_answer": 2}, 2: {"agent_error": 1}}  # steps as metrics count them
    assert d.excluded == {"error": 1} and d.prefix_break_episodes == 1
    assert (d.groups, d.flat_groups, d.flat_episodes) == (3, 2, 3)  # t1 (0, 0) and step 2's lone survivor
    assert d.eval_causes == {"wrong_answer": 1}
    assert [c["code"] for c in d.as_dict()["causes"]] == [c for c in CAUSES if c in d.causes]


def test_diagnose_a_real_run_prints_every_cause_it_had(short_run, capsys):
    assert main(["diagnose", str(short_run)]) == 0
    out = capsys.readouterr().out
    for label in ("agent exception", "tool error", "no answer extracted (format)"):
        assert label in out, out
    assert "RuntimeError" in out and "ZeroDivisionError" in out  # what was raised, in the examples
    assert "48 training episodes" in out and "16 evaluation episodes" in out
    assert "excluded (error)" in out


def test_diagnose_a_folder_that_is_not_a_run_is_one_line(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not a run folder" in err


def test_the_synthetic_tasks_rewards_say_whether_an_answer_was_there():
    """What the example agents return, so diagnose tells a format failure from a wrong answer."""
    from tracerl.tasks.synthetic import TASKS

    spec = TASKS["calculator"]
    task = spec.tasks("train", 1)[0]
    assert spec.rewards(task, f"The answer is {task.answer}.") == {"reward": 1.0, "is_correct": True, "answer_found": 1.0}
    assert spec.rewards(task, f"The answer is {task.answer + 1}.")["answer_found"] == 1.0
    assert spec.rewards(task, "Let me think about it") == {"reward": 0.0, "is_correct": False, "answer_found": 0.0}


def test_an_episode_nothing_graded_is_no_reward_not_a_wrong_answer():
    ungraded = episode("r-eval0-t0-n0", reward=None)
    cause = classify(ungraded, [])
    assert (cause.code, cause.kind, cause.label) == ("no_reward", "setup", "no reward (nothing graded it)")
    assert classify(episode(reward=None, end=T.ERROR, error="boom"), []).code == "agent_error"  # a crash says more
    d = diagnose([(ungraded, []), (episode("r-s0-t0-g0", reward=None), []), (episode("r-s0-t0-g1", 0.0), [])])
    assert d.eval_causes == {"no_reward": 1} and d.causes == {"no_reward": 1, "wrong_answer": 1}
