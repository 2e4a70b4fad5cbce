"""Built-in reward functions, the LLM judge, and how a spec becomes a reward function."""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import math
import re
import textwrap
from typing import Any

import pytest

from tracerl.core.errors import ConfigError, GradingError
from tracerl.core.grading import GradedEpisode
from tracerl.core.types import Episode, Task
from tracerl.tasks.graders import (
    GRADERS,
    builtin,
    normalize,
    resolve_reward,
    reward,
    reward_name,
)
from tracerl.tasks.graders.builtin import make_math, parse_number
from tracerl.tasks.graders.judge import make_judge, parse_score, question_of

GAMED = "Answer: 10 + 2 + 233"  # scored 1 for 12 under the old substring reward


def task(answer: Any = None, **data: Any) -> Task:
    return Task(id="t-1", data=data, answer=answer)


def score(name: str, answer: Any, text: Any, *, data: dict[str, Any] | None = None, **options: Any) -> float:
    out = GRADERS[name](**options)(task(answer, **(data or {})), {"answer": text})
    assert set(out) - {"answer_found"} == {"reward", "is_correct"} and out["is_correct"] == (out["reward"] == 1.0)
    assert out.get("answer_found", 1.0) == 1.0 or out["reward"] == 0.0  # no answer found is never right
    return out["reward"]


@pytest.mark.parametrize(("name", "options", "reply", "found"), [
    ("numeric", {}, "12", 1.0), ("numeric", {}, "twelve or so", 0.0),
    ("regex", {"pattern": r"Answer: (\d+)"}, "Answer: 13", 1.0), ("regex", {"pattern": r"Answer: (\d+)"}, "13", 0.0),
    ("json", {"path": "x"}, '{"x": 13}', 1.0), ("json", {"path": "x"}, "{not json", 0.0),
    ("json", {"path": "x"}, '{"y": 12}', 0.0),
])
def test_graders_that_read_an_answer_say_whether_they_found_one(name, options, reply, found):
    """``answer_found`` tells a reply with no answer in it (a format failure) from a wrong one."""
    out = GRADERS[name](**options)(task(12), {"answer": reply})
    assert out["answer_found"] == found


# ---------------------------------------------------------------------------- shared behaviour

STRICT = [("exact", {}), ("numeric", {}), ("math", {}), ("regex", {"pattern": r"Answer: (-?\d+)$"}),
          ("json", {}), ("contains", {})]


@pytest.mark.parametrize(("name", "options"), STRICT[:-1])
def test_the_gamed_reply_scores_zero_under_every_strict_grader(name, options):
    assert score(name, 12, GAMED, **options) == 0.0
    assert score(name, 245, GAMED, **options) == (1.0 if name in ("math",) else 0.0)


def test_contains_is_the_lenient_one_but_still_needs_a_whole_token():
    assert score("contains", 12, GAMED) == 0.0
    assert score("contains", 2, GAMED) == 1.0


@pytest.mark.parametrize(("name", "options"), STRICT)
def test_missing_or_non_string_artifact_is_a_grading_error_listing_the_artifacts(name, options):
    fn = GRADERS[name](**options)
    with pytest.raises(GradingError, match=r"no artifact 'answer' to grade \(artifacts: code, text\)"):
        fn(task(1), {"text": "1", "code": "x"})
    with pytest.raises(GradingError, match="artifact 'answer' is a int, not a string"):
        fn(task(1), {"answer": 1})
    text = "Answer: 1" if name == "regex" else "1"
    assert GRADERS[name](field="text", **options)(task(1), {"text": text})["reward"] == 1.0


@pytest.mark.parametrize(("name", "options"), STRICT)
def test_a_task_without_reference_is_a_grading_error_naming_it(name, options):
    with pytest.raises(GradingError, match="task 't-1' has no reference answer"):
        GRADERS[name](**options)(task(None), {"answer": "1"})


# ---------------------------------------------------------------------------- exact, numeric


def test_exact():
    assert score("exact", "Paris", "  Paris\n") == 1.0
    assert score("exact", "Paris", "paris") == 0.0
    assert score("exact", "Paris", "PARIS", case_sensitive=False) == 1.0
    assert score("exact", 12, "12") == 1.0
    assert score("exact", 12, "12.0") == 0.0
    assert score("exact", "Paris", "Paris.") == 0.0


@pytest.mark.parametrize(("text", "value"), [
    ("1,234", 1234), ("1,234,567.25", 1234567.25), ("-3", -3), ("\u22123", -3), ("+3", 3), ("12.", 12),
    ("$12", 12), ("-$12", -12), ("$-12", -12), ("50%", 50), (".5", 0.5), ("1e3", 1000), (" 42 \n", 42),
    ("1,234.", 1234),
])
def test_parse_number_reads_one_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["12 + 3", "12 apples", "1,23", "1,2345", "", "12.0.1", "--3", "-$-3", "- 3",
                                  "twelve", "12\n13", "x = 12", "1/2"])
def test_parse_number_refuses_anything_more(text):
    assert parse_number(text) is None


def test_numeric():
    assert score("numeric", 1234, "1,234") == 1.0
    assert score("numeric", "1,234", "1234.0") == 1.0
    assert score("numeric", -7, "-7") == 1.0
    assert score("numeric", 7, "-7") == 0.0
    assert score("numeric", 12, "12 apples") == 0.0
    assert score("numeric", 15, "12 + 3") == 0.0
    assert score("numeric", 0.1 + 0.2, "0.3") == 1.0
    assert score("numeric", 1.0, "1.001") == 0.0
    assert score("numeric", 1.0, "1.001", rel_tol=1e-2) == 1.0
    with pytest.raises(GradingError, match="reference 'Paris' is not a number"):
        score("numeric", "Paris", "1")


# ---------------------------------------------------------------------------- math

MATH_EQUAL = [
    ("0.5", r"\frac{1}{2}"), (r"\frac{1}{2}", "0.5"), ("3/4", r"\boxed{\frac{3}{4}}"),
    ("0.75", r"The answer is $\boxed{\frac{3}{4}}$."), ("2", "x = 2"), ("2", "$x = 2$"),
    (r"\sqrt{8}", r"2\sqrt{2}"), (r"2\sqrt{2}", r"The answer is $\sqrt{8}$"), ("-3", "-3"),
    (r"-\frac{1}{2}", "-0.5"), ("1234", "1,234"), ("x^2+2x+1", "(x+1)^2"), ("1024", "2^{10}"),
    (r"\frac{14}{3}", r"The final answer is $\frac{14}{3}$. I hope it is correct."),
    ("12", "10 + 2"),  # an unevaluated expression equal to the reference counts (use numeric to forbid)
    # units are dropped, by math-verify's normalisation (documented in make_math)
    ("5", "5 cm"), ("5", r"5\text{ cm}"), ("5", r"\boxed{5 \text{ cm}}"), ("12", "12 apples"),
]
MATH_NOT_EQUAL = [
    ("12", GAMED), ("-3", "3"), ("2", r"2\sqrt{2}"), ("2", r"The answer is 2\sqrt{2}"), ("1/3", "0.33"),
    ("(1,2)", "(2,1)"), ("12", "12 or 13"), ("12", r"\boxed{12} \boxed{13}"), ("10", "2^{10}"), ("12", ""),
    ("12", "I don't know"),
    # several different final answers score 0, whichever comes last (docs/benchmarks.md)
    ("12", "13 or 12"), ("12", "either 13 or 12"), ("12", r"\boxed{13} \boxed{12}"),
    ("12", "The answer is 13. The answer is 12."), ("12", "The answer is 12. The answer is 13."),
    ("12", r"\boxed{12}. Final answer: 13"), ("12", "I think 13, maybe 12"),
    ("12", "Step 1: 3 + 4 = 7.\nStep 2: 7 + 5 = 12"),  # no marked answer: math-verify would pick the last
    ("12", '{"question": "x", "answer": "so\\n#### 12"}'), ("12", '{"solution": "\\\\boxed{12}"}'),
]


@pytest.mark.parametrize(("ref", "text"), MATH_EQUAL)
def test_math_equal(ref, text):
    assert score("math", ref, text) == 1.0


@pytest.mark.parametrize(("ref", "text"), MATH_NOT_EQUAL)
def test_math_not_equal(ref, text):
    assert score("math", ref, text) == 0.0


@pytest.mark.parametrize("text", ["9^9^9^9", "$9^{9^{9^{9}}}$", "1000000!", "2^{1000000}", r"$\int_0^1 x\,dx$"])
def test_math_refuses_answers_too_slow_to_compare_quickly(text):
    # Without math-verify's timeout (it needs the main thread), these would make sympy run for ever.
    assert score("math", 1, text) == 0.0


def test_math_works_from_worker_threads():
    fn = make_math()
    cases = [*MATH_EQUAL, *MATH_NOT_EQUAL] * 3
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda c: fn(task(c[0]), {"answer": c[1]})["reward"], cases))
    assert results == [1.0 if c in MATH_EQUAL else 0.0 for c in cases]


def test_math_falls_back_to_tracerls_grader_with_one_warning(monkeypatch, caplog):
    monkeypatch.setattr(builtin, "_math_verify", lambda: None)
    monkeypatch.setattr(builtin, "_warned", builtin.threading.Event())
    with caplog.at_level(logging.WARNING, logger=builtin.__name__):
        first, second = make_math(), make_math()
    assert [r.getMessage() for r in caplog.records if "math-verify" in r.getMessage()] == [
        "the math reward uses tracerl's own answer matching because math-verify (0.8 or later) is not installed; "
        "for LaTeX-aware equivalence install it with: pip install 'tracerl[tasks]'"]
    assert first(task("0.75"), {"answer": r"so \boxed{\frac34}"})["reward"] == 1.0
    assert second(task("0.5"), {"answer": r"\frac{1}{2}"})["reward"] == 1.0
    assert second(task("12"), {"answer": GAMED})["reward"] == 0.0


# ---------------------------------------------------------------------------- regex, contains


def test_regex_demands_the_format():
    pattern = r"Answer: (-?\d+)$"
    assert score("regex", 12, "I think so.\nAnswer: 12", pattern=pattern) == 1.0
    assert score("regex", -4, "Answer: -4", pattern=pattern) == 1.0
    assert score("regex", 12, "Answer: 12 apples", pattern=pattern) == 0.0
    assert score("regex", 12, "answer: 12", pattern=pattern) == 0.0
    assert score("regex", 12, "answer: 12", pattern=pattern, flags="i") == 1.0
    assert score("regex", 12, "Answer: 12\nmore", pattern=pattern) == 0.0
    assert score("regex", 12, "Answer: 12\nmore", pattern=pattern, flags="m") == 1.0
    assert score("regex", "Paris", "<a> Paris </a>", pattern=r"<a>(.*)</a>") == 1.0


@pytest.mark.parametrize(("options", "message"), [
    ({}, "the regex reward needs pattern="),
    ({"pattern": "Answer: ("}, r"pattern 'Answer: \(' is not a valid regular expression"),
    ({"pattern": r"Answer: \d+"}, "has 0 capture groups; it needs exactly one"),
    ({"pattern": r"(a)(b)"}, "has 2 capture groups"),
    ({"pattern": r"(a)", "flags": "ix"}, "unknown flag"),
])
def test_regex_config_errors(options, message):
    with pytest.raises(ConfigError, match=message):
        GRADERS["regex"](**options)


@pytest.mark.parametrize(("text", "found"), [
    ("It is 12.", True), ("(12)", True), ("12", True), ("x=12, y=3", True), ("123", False), ("112", False),
    ("12.5", False), ("1,12", False), ("1.12", False), ("a12", False), ("12b", False), ("1 2", False),
])
def test_contains_needs_a_whole_token(text, found):
    assert score("contains", 12, text) == float(found)


def test_contains_case():
    assert score("contains", "Paris", "it is paris") == 0.0
    assert score("contains", "Paris", "it is paris", case_sensitive=False) == 1.0
    assert score("contains", "New York", "in New York City") == 1.0


# ---------------------------------------------------------------------------- json


def test_json_paths_and_values():
    doc = '{"result": {"total": 12.0, "items": [{"name": "a"}, {"name": "b"}]}, "ok": true}'
    assert score("json", 12, doc, path="result.total") == 1.0
    assert score("json", "12", doc, path="result.total") == 1.0
    assert score("json", 13, doc, path="result.total") == 0.0
    assert score("json", "b", doc, path="result.items.1.name") == 1.0
    assert score("json", "b", doc, path="result.items.2.name") == 0.0  # no such index
    assert score("json", "b", doc, path="result.missing") == 0.0
    assert score("json", True, doc, path="ok") == 1.0
    assert score("json", 1, doc, path="ok") == 0.0  # true is not the number 1
    assert score("json", '[{"name": "a"}, {"name": "b"}]', doc, path="result.items") == 1.0
    assert score("json", {"a": [1, 2]}, '{"a": [1, 2]}') == 1.0


def test_json_reads_a_fence_and_scores_invalid_json_zero():
    assert score("json", 3, 'Here:\n```json\n{"n": 3}\n```\nDone.', path="n") == 1.0
    assert score("json", 3, '```\n{"n": 3}\n```', path="n") == 1.0
    assert score("json", 3, '{"n": 3', path="n") == 0.0
    assert score("json", 3, "n is 3", path="n") == 0.0
    with pytest.raises(ConfigError, match="empty part"):
        GRADERS["json"](path="a..b")


# ---------------------------------------------------------------------------- code

ADD_TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]


def test_code_passes_fails_and_times_out():
    good = "```python\ndef add(a, b):\n    return a + b\n```"
    assert score("code", "", good, data={"tests": ADD_TESTS}) == 1.0
    assert score("code", "", good, data={"tests": "\n".join(ADD_TESTS)}) == 1.0
    assert score("code", "", "def add(a, b):\n    return a - b", data={"tests": ADD_TESTS}) == 0.0
    assert score("code", "", "def add(a, b) return", data={"tests": ADD_TESTS}) == 0.0
    slow = "def add(a, b):\n    while True: pass"
    assert score("code", "", slow, data={"tests": ADD_TESTS}, timeout_s=0.5) == 0.0
    assert score("code", "", good, data={"asserts": ADD_TESTS}, tests_field="asserts") == 1.0


def test_code_without_tests_is_a_grading_error():
    with pytest.raises(GradingError, match=r"task.data\['tests'\] should be Python asserts.*data fields: prompt"):
        GRADERS["code"]()(task(None, prompt="add"), {"answer": "def add(a, b): return a + b"})


# ---------------------------------------------------------------------------- judge: the parser


@pytest.mark.parametrize(("reply", "scale", "value"), [
    ("Looks right.\nSCORE: 1", 1, 1.0), ("SCORE: 0", 1, 0.0), ("score: 0.75.", 1, 0.75),
    ("**Score:** 0.5", 1, 0.5), ("SCORE = .5", 1, 0.5), ("Reply with SCORE: <n>\nSCORE: 0.2\nSCORE: 0.9", 1, 0.9),
    ("SCORE: 7/10", 10, 7.0), ("SCORE: 7", 10, 7.0), ("Right.\nSCORE: 1\nThanks!", 1, 1.0),
])
def test_parse_score_reads_the_last_score_line(reply, scale, value):
    assert parse_score(reply, scale) == value


@pytest.mark.parametrize(("reply", "scale", "message"), [
    ("", 1, "no 'SCORE: <0-1>' line: ''"), (None, 1, "no 'SCORE"), ("The answer is right.", 1, "no 'SCORE"),
    ("SCORE: high", 1, "last SCORE line is not one number"), ("SCORE: 1\nSCORE: high", 1, "not one number"),
    ("SCORE: 1 or 0", 1, "not one number"), ("SCORE: 7/10", 1, "scored out of 10, but the scale is 0-1"),
    ("SCORE: 1.5", 1, "outside 0-1"), ("SCORE: -0.1", 1, "outside 0-1"), ("SCORE: 11", 10, "outside 0-10"),
    ("My SCORE: 1", 1, "no 'SCORE"),
])
def test_parse_score_refuses_what_it_cannot_read(reply, scale, message):
    with pytest.raises(GradingError, match=message):
        parse_score(reply, scale)


def test_parse_score_quotes_the_first_200_characters_of_the_reply():
    with pytest.raises(GradingError) as info:
        parse_score("x" * 500)
    assert repr("x" * 200) in str(info.value) and "x" * 201 not in str(info.value)


def test_question_of_prefers_question_then_the_first_string_field():
    assert question_of(task(1, id=3, prompt="P", question="Q")) == "Q"
    assert question_of(task(1, id=3, problem="P", solution="S")) == "P"
    assert question_of(task(1, id=3)) == ""


@pytest.mark.parametrize(("options", "message"), [
    ({"base_url": "localhost:8000", "model": "m"}, "must be an http"),
    ({"base_url": "http://x/v1", "model": ""}, "model= is required"),
    ({"base_url": "http://x/v1", "model": "m", "rubric": "{answer} {score}"}, r"unknown placeholder\(s\) \{score\}"),
    ({"base_url": "http://x/v1", "model": "m", "rubric": "{answer} {"}, "not a valid template"),
    ({"base_url": "http://x/v1", "model": "m", "rubric": "{question}"}, "no {answer} placeholder"),
    ({"base_url": "http://x/v1", "model": "m", "scale": 0}, "must be positive"),
    ({"base_url": "http://x/v1", "model": "m", "api_key_env": "TRACERL_TEST_NO_SUCH_KEY"},
     "TRACERL_TEST_NO_SUCH_KEY .* is not set"),
])
def test_judge_config_errors(options, message):
    with pytest.raises(ConfigError, match=message):
        make_judge(**options)


# ---------------------------------------------------------------------------- judge: live servers


def test_a_well_behaved_judge_gets_question_answer_and_reference():
    from tracerl.testing import ScriptedServer

    seen: list[list[dict[str, Any]]] = []

    def judge_script(messages, tools):
        seen.append(messages)
        return "Looks right.\nSCORE: 8" if "out of ten" in messages[-1]["content"] else "Looks right.\nSCORE: 1"

    with ScriptedServer(judge_script) as server:
        fn = make_judge(server.url + "/v1", "scripted")
        t = task("Paris", question="What is the capital of France?")
        assert fn(t, {"answer": "It is Paris."}) == {"reward": 1.0}
        prompt = seen[-1][-1]["content"]
        assert "What is the capital of France?" in prompt and "It is Paris." in prompt and "Paris" in prompt
        assert "from 0 (wrong) to 1 (correct)" in prompt
        ten = make_judge(server.url + "/v1", "scripted", scale=10, rubric="out of ten: {answer} vs {reference}")
        assert ten(t, {"answer": "Paris"}) == {"reward": 0.8}
        with pytest.raises(GradingError, match="task 't-1' has no reference answer"):
            fn(task(None, question="Q"), {"answer": "A"})
        assert make_judge(server.url + "/v1", "scripted", rubric="{answer}")(task(None), {"answer": "A"})["reward"] == 1


def test_the_tiny_model_as_judge_gives_a_score_or_a_grading_error_with_its_reply(tiny_engine, tmp_path):
    from tracerl.gateway.server import GatewayServer

    with GatewayServer(tiny_engine, str(tmp_path / "s.db")) as gw:
        fn = make_judge(gw.url + "/v1", tiny_engine.model_name, max_tokens=16)
        try:
            out = fn(task("4", question="What is 2 + 2?"), {"answer": "4"})
        except GradingError as exc:
            assert "the judge's" in str(exc) and "'" in str(exc)  # the reply is quoted
        else:
            assert 0.0 <= out["reward"] <= 1.0
        with pytest.raises(GradingError, match=r"answered HTTP 404: .*is not served here"):
            make_judge(gw.url + "/v1", "no-such-model", max_retries=0)(task("4"), {"answer": "4"})


def test_an_unreachable_judge_is_a_grading_error():
    fn = make_judge("http://127.0.0.1:9/v1", "m", max_retries=0, timeout_s=5)
    with pytest.raises(GradingError, match="could not be reached"):
        fn(task("4"), {"answer": "4"})


# ---------------------------------------------------------------------------- resolve_reward


def test_resolve_builtins_with_options():
    assert set(GRADERS) == {"exact", "numeric", "math", "regex", "contains", "json", "code", "judge"}
    fn = resolve_reward("regex", pattern=r"= (\d+)$")
    assert fn(task(3), {"answer": "x = 3"}) == {"reward": 1.0, "is_correct": True, "answer_found": 1.0}
    with pytest.raises(ConfigError, match=r"reward 'exact' has no option 'pattern'; its options: field, case_sensitive"):
        resolve_reward("exact", pattern="x")
    with pytest.raises(ConfigError, match=r"reward 'judge' needs the option\(s\) base_url, model; its options: "):
        resolve_reward("judge")


def test_resolve_module_and_file_specs(tmp_path, monkeypatch):
    (tmp_path / "tracerl_test_rewards.py").write_text(textwrap.dedent("""
        import tracerl.tasks.graders as g
        from tracerl_test_helper import bonus
        def length(task, artifacts):
            return bonus() + len(artifacts["answer"])
        @g.reward(name="format")
        def fmt(task, artifacts):
            return 1.0
        NOT_A_FUNCTION = 3
        def one_arg(task):
            return 1.0
    """))
    (tmp_path / "tracerl_test_helper.py").write_text("def bonus():\n    return 0.5\n")
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    file_fn = resolve_reward(f"{tmp_path / 'tracerl_test_rewards.py'}:length")
    assert file_fn(task(1), {"answer": "abc"}) == 3.5
    monkeypatch.syspath_prepend(str(tmp_path))
    module_fn = resolve_reward("tracerl_test_rewards:fmt")
    assert module_fn(task(1), {}) == 1.0 and reward_name(module_fn) == "format" and reward_name(file_fn) == "reward"
    errors = {
        "nope": r"^unknown reward 'nope'; the built-in rewards are exact, numeric, math, regex, contains, json, "
                r"code, judge, or give module:function or path/file.py:function$",
        "no_such_module_xyz:fn": r"^reward 'no_such_module_xyz:fn': module 'no_such_module_xyz' cannot be imported: "
                                 r"No module named 'no_such_module_xyz'$",
        f"{tmp_path / 'missing.py'}:fn": r"file .*missing.py does not exist",
        f"{tmp_path / 'broken.py'}:fn": r"importing .*broken.py failed: RuntimeError: boom$",
        "tracerl_test_rewards:nothing": r"^reward 'tracerl_test_rewards:nothing': tracerl_test_rewards has no function 'nothing'$",
        "tracerl_test_rewards:NOT_A_FUNCTION": r"tracerl_test_rewards.NOT_A_FUNCTION is a int, not a function$",
        "tracerl_test_rewards:one_arg": r"one_arg\(task\) cannot be called as fn\(task, artifacts\)",
        "": r"must be a built-in name",
    }
    for spec, message in errors.items():
        with pytest.raises(ConfigError, match=message) as info:
            resolve_reward(spec)
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"reward 'tracerl_test_rewards:length' takes no options \(got scale\)"):
        resolve_reward("tracerl_test_rewards:length", scale=2)


class _Scorer:
    def __init__(self, bonus: float):
        self.bonus = bonus

    def grade(self, task, artifacts):
        return self.bonus

    def __call__(self, task, episode: Episode):
        return self.bonus


def _weighted(task, artifacts, weight=1.0):
    return weight


def test_resolve_callables_bound_methods_and_partials():
    assert resolve_reward(_Scorer(2).grade)(task(1), {}) == 2
    assert resolve_reward(functools.partial(_weighted, weight=3.0))(task(1), {}) == 3.0
    assert resolve_reward(_Scorer(1))(task(1), {}) == 1
    with pytest.raises(ConfigError, match="cannot be called as fn"):
        resolve_reward(functools.partial(_weighted, task(1), {}, 2.0))
    with pytest.raises(ConfigError, match="cannot be called as fn"):
        resolve_reward(lambda task, artifacts, *, key: 1.0)
    with pytest.raises(ConfigError, match="options .* are only for the built-in rewards"):
        resolve_reward(_weighted, weight=2)


# ---------------------------------------------------------------------------- @reward, the graded episode, normalize


def test_reward_decorator():
    @reward
    def plain(task, artifacts):
        return 0.5

    @reward(name="format")
    def fmt(task, artifacts):
        return 1.0

    assert plain(task(1), {}) == 0.5 and reward_name(plain) == "reward" and reward_name(fmt) == "format"
    assert resolve_reward(fmt) is fmt
    assert normalize(fmt(task(1), {}), reward_name(fmt)) == {"format": 1.0}
    bound = reward(name="bonus")(_Scorer(4).grade)
    assert reward_name(bound) == "bonus" and bound(task(1), {}) == 4
    with pytest.raises(ConfigError, match=r"cannot be called as fn\(task, artifacts\)"):
        reward(lambda task: 1.0)
    with pytest.raises(ConfigError, match="name must be a non-empty string"):
        reward(name="is_correct")


def test_every_builtin_grades_the_episode_object_reward_functions_receive():
    """Graders get a GradedEpisode (tracerl.core.grading), not a dict: each built-in reads it as
    the mapping of the artifacts it is."""
    graded = GradedEpisode.of(Episode(id="e", artifacts={"answer": "12"}))
    for name, reference in (("exact", "12"), ("numeric", 12), ("contains", "12"), ("json", 12)):
        out = GRADERS[name]()(task(reference), graded)
        assert out["reward"] == 1.0 and out["is_correct"] is True, name
    assert GRADERS["regex"](pattern=r"(\d+)")(task(12), graded)["reward"] == 1.0


@pytest.mark.parametrize(("value", "name", "expected"), [
    (1, "reward", {"reward": 1.0}), (0.25, "format", {"format": 0.25}),
    (True, "reward", {"reward": 1.0, "is_correct": True}), (False, "reward", {"reward": 0.0, "is_correct": False}),
    ({"reward": 1.0, "is_correct": True, "format": 0.5}, "reward", {"reward": 1.0, "is_correct": True, "format": 0.5}),
    ({"reward": 2}, "reward", {"reward": 2.0}),
])
def test_normalize(value, name, expected):
    assert normalize(value, name) == expected


@pytest.mark.parametrize(("value", "message"), [
    (math.nan, "non-finite"), (math.inf, "non-finite"), ({"reward": -math.inf}, "non-finite"),
    ("1.0", "returned '1.0' (a str)"), (None, "returned None (a NoneType)"), ({"is_correct": True}, "holds no numeric reward"),
    ({"reward": "high"}, "holds no numeric reward"), ({}, "holds no numeric reward"),
])
def test_normalize_refuses(value, message):
    with pytest.raises(GradingError, match=re.escape(message)):
        normalize(value)
