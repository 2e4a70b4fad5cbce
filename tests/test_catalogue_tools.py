"""Tool use: the call parser and the two graders (tracerl.tasks.graders.calls), and the xlam and
bfcl benchmarks on their fixture rows (tests/data/xlam, tests/data/bfcl)."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest

from tracerl.core.errors import ConfigError
from tracerl.tasks.catalogue.tools import BFCL, XLAM, call_agent, reply_of, xlam_tool
from tracerl.tasks.graders.calls import ast_check, match_calls, parse_calls, parse_python_calls

pytest.importorskip("datasets")

DATA = Path(__file__).parent / "data"



def _tasks(bench):
    return {t.id.split("/")[1]: t for role in bench.splits for t in bench.tasks(role, 10, path=DATA)}


@pytest.fixture(scope="module")
def xlam():
    return _tasks(XLAM())


@pytest.fixture(scope="module")
def bfcl():
    return _tasks(BFCL())


# -- reading calls ----------------------------------------------------------------------------

BETA = {"name": "live_giveaways_by_type", "arguments": {"type": "beta"}}


@pytest.mark.parametrize("text", [
    json.dumps([BETA]),
    json.dumps(BETA),
    f"```json\n{json.dumps([BETA])}\n```",
    f"<tool_call>\n{json.dumps(BETA)}\n</tool_call>",
    json.dumps({"tool_calls": [BETA]}),
    json.dumps([{"type": "function", "function": {"name": BETA["name"], "arguments": '{"type": "beta"}'}}]),
    f"I will call the function now: {json.dumps([BETA])} and then report back.",
    f"<think>maybe [1, 2]</think>{json.dumps([BETA])}",
    "[live_giveaways_by_type(type='beta')]",
    "live_giveaways_by_type(type='beta')",
])
def test_calls_are_read_in_each_form_models_write(text):
    assert parse_calls(text) == [BETA]


@pytest.mark.parametrize("text", [None, "", "I don't know.", "The answer is", "```python\n```", "\\boxed{}",
                                  "[1, 2, 3]", '{"answer": 4}', "x = f(a=1)",
                                  f"<tool_call>{json.dumps(BETA)}</tool_call><tool_call>{{oops</tool_call>"])
def test_replies_without_calls_read_as_none(text):
    assert parse_calls(text) is None


def test_python_calls_are_parsed_not_evaluated():
    calls = parse_python_calls("[f(a=__import__('os').system('touch /tmp/pwned'), b=2**3, c=-1.5, d=[1, (2, 3)])]")
    assert calls == [{"name": "f", "arguments": {"a": "__import__('os').system('touch /tmp/pwned')", "b": 8,
                                                 "c": -1.5, "d": [1, (2, 3)]}}]
    started = time.monotonic()
    huge = parse_python_calls("[f(x=10**10**10)]")
    assert time.monotonic() - started < 1 and huge == [{"name": "f", "arguments": {"x": "10 ** 10 ** 10"}}]
    assert parse_python_calls("[math.hypot(x=4, y=5), pkg.sub.g(v={'k': 'x'})]") == [
        {"name": "math.hypot", "arguments": {"x": 4, "y": 5}}, {"name": "pkg.sub.g", "arguments": {"v": {"k": "x"}}}]
    assert parse_python_calls("[f(**kw)]") is None and parse_python_calls("[f(a=1), 3]") is None


# -- xLAM: NeMo Gym's rule ---------------------------------------------------------------------

def test_match_calls_follows_nemo_gyms_rule():
    game = {"name": "live_giveaways_by_type", "arguments": {"type": "game"}}
    assert match_calls([game, BETA], [BETA, game])  # order does not matter
    assert match_calls([{"name": "f", "arguments": {"a": 1, "extra": 2}}], [{"name": "f", "arguments": {"a": 1}}])
    assert match_calls([{"name": "f", "arguments": {"a": 14.0}}], [{"name": "f", "arguments": {"a": 14}}])
    assert not match_calls([{"name": "f", "arguments": {"a": True}}], [{"name": "f", "arguments": {"a": 1}}])
    assert not match_calls([{"name": "f", "arguments": {}}], [{"name": "f", "arguments": {"a": 1}}])
    assert not match_calls([BETA, BETA], [BETA, game])  # each expected call needs its own
    assert not match_calls([BETA], [BETA, game]) and not match_calls([BETA, game, game], [BETA, game])
    assert not match_calls(None, [BETA])
    # A full matching, not a greedy one: the first call could cover either expected call.
    wide = {"name": "f", "arguments": {"a": 1, "b": 2}}
    assert match_calls([wide, {"name": "f", "arguments": {"a": 1}}],
                       [{"name": "f", "arguments": {"a": 1}}, {"name": "f", "arguments": {"b": 2}}])


def test_xlam_grades_the_reference_calls_in_any_order_and_near_misses_zero(xlam):
    bench, task = XLAM(), xlam["40001"]
    subarray, palindrome = task.answer
    assert bench.is_correct(task, json.dumps([palindrome, subarray]))
    assert bench.is_correct(task, f"<tool_call>{json.dumps(subarray)}</tool_call>\n<tool_call>{json.dumps(palindrome)}</tool_call>")
    wrong = {**subarray, "arguments": {"nums": [2, -1, 3, -4]}}
    assert not bench.is_correct(task, json.dumps([wrong, palindrome]))
    assert not bench.is_correct(task, json.dumps([subarray]))  # a call missing
    distractor = {"name": "calculate_factorial", "arguments": {"n": 5}}
    assert not bench.is_correct(task, json.dumps([subarray, palindrome, distractor]))
    renamed = {"name": "is_palindrome_check", "arguments": palindrome["arguments"]}
    assert not bench.is_correct(task, json.dumps([subarray, renamed]))


def test_xlam_numbers_compare_by_value_and_string_arguments_exactly(xlam):
    bench, task = XLAM(), xlam["40007"]
    currency, interest = task.answer
    floats = {**currency, "arguments": {**currency["arguments"], "amount": 100.0}}
    assert bench.is_correct(task, json.dumps([interest, floats]))
    lower = {**currency, "arguments": {**currency["arguments"], "to_currency": "eur"}}
    assert not bench.is_correct(task, json.dumps([interest, lower]))
    # The reference spells out n=1 (a default): a call that leaves it out misses it.
    no_n = {**interest, "arguments": {k: v for k, v in interest["arguments"].items() if k != "n"}}
    assert not bench.is_correct(task, json.dumps([currency, no_n]))


def test_xlam_tools_become_json_schema(xlam):
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in XLAM().tools(xlam["40001"])}
    assert tools["find_max_subarray_sum"] == {"type": "object", "required": ["nums"], "properties": {
        "nums": {"type": "array", "items": {"type": "integer"}, "description": "The input list of integers."}}}
    t3ma = xlam_tool(json.loads(xlam["2"].data["tools"])[0])["function"]["parameters"]
    assert t3ma["properties"]["v_factor"]["type"] == "integer" and t3ma["properties"]["format"]["type"] == "string"
    assert t3ma["required"] == []  # every t3ma parameter has a default (NeMo Gym's rule)


def test_tool_calls_of_a_message_are_graded_as_the_reply(xlam):
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "live_giveaways_by_type", "arguments": '{"type": "game"}'}},
        {"id": "2", "type": "function", "function": {"name": "live_giveaways_by_type", "arguments": '{"type": "beta"}'}}]}
    assert XLAM().is_correct(xlam["0"], reply_of(message))
    broken = {**message, "tool_calls": [{"function": {"name": "live_giveaways_by_type", "arguments": "{type: beta"}}]}
    assert not XLAM().is_correct(xlam["0"], reply_of(broken))
    assert reply_of({"role": "assistant", "content": "no call"}) == "no call"


def test_call_agent_offers_the_tools_and_grades_the_calls(xlam, monkeypatch):
    from tracerl.tasks import agents

    sent = {}

    def fake_turn(http, config, messages, tools, n_call):
        sent.update(messages=messages, tools=tools)
        return {"role": "assistant", "tool_calls": [
            {"function": {"name": "web_chain_details", "arguments": '{"chain_slug": "ethereum"}'}}]}

    monkeypatch.setattr(agents, "chat_client", lambda config: contextlib.nullcontext())
    monkeypatch.setattr(agents, "chat_turn", fake_turn)
    task = xlam["1"]
    assert call_agent(task, None) == {"reward": 1.0, "is_correct": True}
    assert [t["function"]["name"] for t in sent["tools"]] == ["peers", "web_chain_details"]
    assert sent["messages"][-1] == {"role": "user", "content": task.data["query"]}


# -- BFCL's AST checker ------------------------------------------------------------------------

def _check(task, **arguments):
    return ast_check(task.data["function"], [{"name": task.data["function"][0]["name"], "arguments": arguments}],
                     task.answer)


def test_bfcl_accepts_possible_answers_and_optional_parameters_left_out(bfcl):
    assert _check(bfcl["simple_0"], base=10, height=5).valid
    assert _check(bfcl["simple_0"], base=10, height=5, unit="Units").valid  # strings: case-insensitive
    assert _check(bfcl["simple_13"], function="lambda x: x**2", interval=[1.0, 3.0]).valid
    assert _check(bfcl["simple_13"], function="x ** 2", interval=[1.0, 3.0], method="trapezoidal").valid
    assert _check(bfcl["simple_14"], function="3x**2 + 2x - 1", x_value=0).valid  # int passes for float
    assert _check(bfcl["simple_17"], number=450, formatted=True).valid


@pytest.mark.parametrize(("row", "arguments", "error"), [
    ("simple_0", {"base": 10}, "missing required parameter 'height'"),
    ("simple_17", {"number": 450}, "missing required parameter 'formatted'"),  # required beats [true, ""]
    ("simple_0", {"base": 10, "height": 5, "color": "red"}, "unexpected parameter 'color'"),
    ("simple_0", {"base": "10", "height": 5}, "not of type integer"),
    ("simple_0", {"base": 10.0, "height": 5}, "not of type integer"),
    ("simple_0", {"base": 12, "height": 5}, "is not among"),
    ("simple_0", {"base": 10, "height": 5, "unit": "cm"}, "is not among"),
    ("simple_13", {"function": "x**2", "interval": [1, 3]}, "not of type array"),  # BFCL: items must be floats
    ("simple_13", {"function": "x**3", "interval": [1.0, 3.0]}, "is not among"),
    ("simple_17", {"number": 450, "formatted": "true"}, "not of type boolean"),
    ("simple_2", {"x": 4, "y": 5, "z": 1}, "is not among"),
])
def test_bfcl_near_misses_fail_with_the_reason(bfcl, row, arguments, error):
    verdict = _check(bfcl[row], **arguments)
    assert not verdict.valid and error in verdict.error


def test_bfcl_names_counts_and_reply_forms(bfcl):
    bench, task = BFCL(), bfcl["simple_2"]
    for reply in ('[{"name": "math.hypot", "arguments": {"x": 4, "y": 5}}]',
                  '[{"name": "math_hypot", "arguments": {"x": 4, "y": 5}}]',  # the tool's own name
                  "[math.hypot(x=4, y=5, z=0)]"):
        assert bench.is_correct(task, reply), reply
    assert not bench.is_correct(task, '[{"name": "hypot", "arguments": {"x": 4, "y": 5}}]')
    assert not bench.is_correct(task, "[math.hypot(x=4, y=5), math.hypot(x=4, y=5)]")
    assert not bench.is_correct(task, "[math.hypot(4, 5)]")  # positional arguments: BFCL reads none


def test_bfcl_rows_join_their_possible_answers_and_tools_use_json_schema(bfcl, tmp_path):
    task = bfcl["simple_13"]
    assert task.answer == task.data["ground_truth"] and set(task.data) == {"id", "question", "function", "ground_truth"}
    tool = BFCL().tools(bfcl["simple_2"])[0]["function"]
    assert tool["name"] == "math_hypot" and tool["parameters"]["type"] == "object"
    interval = BFCL().tools(task)[0]["function"]["parameters"]["properties"]["interval"]
    assert interval["type"] == "array" and interval["items"] == {"type": "number"}
    assert BFCL().messages(task) == [{"role": "user", "content": "Calculate the area under the curve y=x^2 from x=1 to x=3."}]
    with pytest.raises(ConfigError, match="two files"):
        BFCL().rows("test", path=DATA / "bfcl" / "test.jsonl")
    lonely = tmp_path / "bfcl"
    (lonely / "possible_answer").mkdir(parents=True)
    (lonely / "test.jsonl").write_text((DATA / "bfcl" / "test.jsonl").read_text())
    answers = (DATA / "bfcl" / "possible_answer" / "test.jsonl").read_text().splitlines()
    (lonely / "possible_answer" / "test.jsonl").write_text("\n".join(answers[1:]) + "\n")
    with pytest.raises(ConfigError, match="no possible answer"):
        BFCL().rows("test", path=tmp_path)
