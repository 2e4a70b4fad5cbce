"""The bundled tiny policy (tracerl/models/tiny) and the synthetic tasks it is trained on."""

from __future__ import annotations

import json
import re

import pytest

from tracerl.models import tiny_model_path
from tracerl.tasks.synthetic import (
    CALCULATOR_TOOL,
    FEEDBACK,
    SYSTEM_PROMPT,
    TASKS,
    ExpressionError,
    calculator,
    evaluate,
    extract_answer,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TRICKY = [
    "Hello World!\n\nÜñíçødé ✓ 中文 🙂 e\u0301",
    '{"name": "calculator", "arguments": {"expression": "2 * (3 + 4)"}}',
    "  leading and trailing spaces  \t\r\n",
    "\n\n\nUPPER lower 0123456789 !@#$%^&*()[]{}<>~`|\\/'\";:,.?",
    "<|im_start|>user\nliteral specials<|im_end|>\n<tool_call></tool_call>",
    "\x00\x07 control bytes \u2028 and a lone combining mark \u0301",
    "",
]


@pytest.fixture(scope="module")
def tok():
    return transformers.AutoTokenizer.from_pretrained(tiny_model_path())


@pytest.fixture(scope="module")
def model():
    m = transformers.AutoModelForCausalLM.from_pretrained(tiny_model_path())
    return m.eval()


def ids(tok, messages, **kwargs) -> list[int]:
    return tok.apply_chat_template(messages, tokenize=True, return_dict=False, **kwargs)


# ------------------------------------------------------------------ model and tokenizer


def test_loads_like_a_hub_model(model, tok):
    assert type(model).__name__ == "LlamaForCausalLM"
    assert 1_000_000 <= model.num_parameters() <= 5_000_000
    assert model.config.max_position_embeddings >= 1024
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == model.config.eos_token_id
    assert tok.pad_token_id is not None and tok.pad_token_id != tok.eos_token_id
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert "Qwen" not in type(tok).__name__  # Qwen2Tokenizer silently drops characters
    files = {p.name for p in tiny_model_path().iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "training_report.json"} <= files
    assert sum(p.stat().st_size for p in tiny_model_path().iterdir()) < 25_000_000


@pytest.mark.parametrize("text", TRICKY)
def test_tokenizer_round_trips_any_text(tok, text):
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text


def test_no_special_tokens_added_and_digits_are_single_tokens(tok):
    tokens = tok.convert_ids_to_tokens(tok.encode("The answer is 1234.", add_special_tokens=False))
    assert tokens[-5:] == ["1", "2", "3", "4", "."]
    assert tok.encode("", add_special_tokens=True) == []


def assert_extends(tok, prompt: list[int], reply: str, full: list[int]) -> None:
    """Token-in/token-out: prompt + tokens(reply) + <|im_end|> is a prefix of the next prompt."""
    expected = prompt + tok.encode(reply, add_special_tokens=False) + [tok.eos_token_id]
    assert full[: len(expected)] == expected


REPLIES = ["The answer is 68.", " spaced out \n", "42", "\n", "Ünïcode ✓ 🙂.", "a<tool_call>b"]


@pytest.mark.parametrize("reply", REPLIES)
def test_chat_template_prefix_extension(tok, reply):
    msgs = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "What is 23 + 45?"}]
    prompt = ids(tok, msgs, add_generation_prompt=True)
    turn = [{"role": "assistant", "content": reply}, {"role": "user", "content": FEEDBACK}]
    full = ids(tok, msgs + turn, add_generation_prompt=True)
    assert_extends(tok, prompt, reply, full)
    # and again on the second turn, with the conversation rendered from scratch
    assert_extends(tok, full, "The answer is 67.", ids(tok, msgs + turn + [
        {"role": "assistant", "content": "The answer is 67."}, {"role": "user", "content": FEEDBACK}
    ], add_generation_prompt=True))


@pytest.mark.parametrize("arguments", ['{"expression": "23 + 45"}', {"expression": "23 + 45"}])
def test_chat_template_prefix_extension_with_tool_call(tok, arguments):
    msgs = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "What is 23 + 45?"}]
    prompt = ids(tok, msgs, tools=[CALCULATOR_TOOL], add_generation_prompt=True)
    text = tok.decode(prompt)
    assert text.startswith("<|im_start|>system\n" + SYSTEM_PROMPT + "\n\n# Tools\n<tools>\n")
    assert json.dumps(CALCULATOR_TOOL) in text and text.endswith("<|im_start|>assistant\n")

    generated = '<tool_call>{"name": "calculator", "arguments": {"expression": "23 + 45"}}</tool_call>'
    call = {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": arguments}}
    msgs += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "68"},
    ]
    after_tool = ids(tok, msgs, tools=[CALCULATOR_TOOL], add_generation_prompt=True)
    assert_extends(tok, prompt, generated, after_tool)
    assert tok.decode(after_tool).endswith("<|im_start|>tool\n68<|im_end|>\n<|im_start|>assistant\n")

    msgs += [{"role": "assistant", "content": "The answer is 68."}, {"role": "user", "content": "Thanks."}]
    assert_extends(tok, after_tool, "The answer is 68.",
                   ids(tok, msgs, tools=[CALCULATOR_TOOL], add_generation_prompt=True))


def test_greedy_answers_are_numbers_in_a_trained_format(model, tok):
    tasks = TASKS["arithmetic"].tasks("test", 8, seed=0)
    prompts = [ids(tok, TASKS["arithmetic"].messages(t), add_generation_prompt=True) for t in tasks]
    batch = tok.pad({"input_ids": prompts}, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=16, do_sample=False)
    for row in out[:, batch["input_ids"].shape[1] :].tolist():
        assert tok.eos_token_id in row
        text = tok.decode(row[: row.index(tok.eos_token_id)])
        assert re.fullmatch(r"The answer is -?\d+\.|-?\d+|Answer: -?\d+", text), text


def test_generated_tool_call_round_trips_through_the_gateway(model, tok):
    """Token-in/token-out on the model's own tool call: the gateway parses it into OpenAI
    tool_calls, the agent sends them back, and the template renders the same tokens."""
    from tracerl.gateway.protocol import ChatMessage, parse_tool_calls, template_messages

    task = TASKS["arithmetic"].tasks("test", 1)[0]
    msgs = TASKS["arithmetic"].messages(task)
    prompt = ids(tok, msgs, tools=[CALCULATOR_TOOL], add_generation_prompt=True)
    forced = tok.encode("<tool_call>", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt + forced]), max_new_tokens=32, do_sample=False)
    response = out[0, len(prompt) :].tolist()
    response = response[: response.index(tok.eos_token_id) + 1]
    content, calls = parse_tool_calls(tok.decode(response, skip_special_tokens=True))
    assert content is None and len(calls) == 1
    assert set(json.loads(calls[0]["function"]["arguments"])) == {"expression"}
    sent = [ChatMessage(**m) for m in msgs] + [
        ChatMessage(role="assistant", content=None, tool_calls=calls),
        ChatMessage(role="tool", tool_call_id=calls[0]["id"], content=calculator(task.data["expression"])),
    ]
    after = ids(tok, template_messages(sent), tools=[CALCULATOR_TOOL], add_generation_prompt=True)
    assert after[: len(prompt) + len(response)] == prompt + response


def test_training_report_leaves_headroom():
    """Deliberately partial: the model knows about half the single-digit sums but states them
    in the graded form ("The answer is N.") only some of the time; RL's reward has that gap to close."""
    report = json.loads((tiny_model_path() / "training_report.json").read_text())
    greedy, sampled = report["greedy"]["arithmetic"], report["sampled"]["arithmetic"]
    assert greedy["accuracy"] <= 0.5 and 0.05 <= sampled["accuracy"] <= 0.5
    assert sampled["any_format_accuracy"] >= sampled["accuracy"] + 0.3
    assert greedy["any_format_accuracy"] >= 0.45


def test_multiturn_prompt_fits_the_context(tok, model):
    msgs = TASKS["multiturn"].messages(TASKS["multiturn"].tasks("test", 1)[0])
    for _ in range(3):
        msgs += [{"role": "assistant", "content": "The answer is 12345."}, {"role": "user", "content": FEEDBACK}]
    assert len(ids(tok, msgs, tools=[CALCULATOR_TOOL], add_generation_prompt=True)) < 512
    assert model.config.max_position_embeddings >= 1024


# ------------------------------------------------------------------ synthetic tasks


def test_arithmetic_reward_and_extraction():
    arithmetic = TASKS["arithmetic"]
    task = arithmetic.tasks("test", 1)[0].model_copy(update={"answer": 68})
    assert arithmetic.reward(task, "The answer is 68.") == 1.0
    assert arithmetic.reward(task, "Let me think.\nthe answer is 68") == 1.0
    assert arithmetic.reward(task, "The answer is 67.") == 0.0
    assert arithmetic.reward(task, "The answer is 67.\nThe answer is 68.") == 1.0  # the last one counts
    for malformed in ["68", "The answer is sixty-eight.", "The answer is 68. Or 69.", "", None]:
        assert arithmetic.reward(task, malformed) == 0.0, malformed
    assert extract_answer("The answer is -5.") == "-5"
    assert extract_answer("The answer is (3 + 4) * 2.") == "(3 + 4) * 2"
    assert extract_answer("The answer is.") is None and extract_answer("no answer") is None
    assert arithmetic.feedback(task, "The answer is 1.", 1) is None


def test_countdown_reward():
    countdown = TASKS["countdown"]
    task = countdown.tasks("test", 1)[0].model_copy(update={"data": {"numbers": [3, 4, 2, 7], "target": 14}})
    assert countdown.reward(task, "The answer is (3 + 4) * 2.") == 1.0
    assert countdown.reward(task, "The answer is 7 * 2.") == 1.0  # a subset is allowed
    assert countdown.reward(task, "The answer is 7 + 7.") == 0.0  # 7 used twice
    assert countdown.reward(task, "The answer is 5 + 9.") == 0.0  # numbers not given
    assert countdown.reward(task, "The answer is 3 + 4 * 2.") == 0.0  # = 11
    assert countdown.reward(task, "The answer is -(3 - 4) * 14.") == 0.0  # no unary minus
    assert countdown.reward(task, "The answer is __import__('os').") == 0.0
    assert countdown.reward(task, "The answer is (3 + 4 * 2.") == 0.0


def test_countdown_reference_solutions_are_correct():
    countdown = TASKS["countdown"]
    for task in countdown.tasks("train", 50, seed=3):
        assert countdown.reward(task, f"The answer is {task.answer}.") == 1.0
        assert 3 <= len(task.data["numbers"]) <= 4 and 1 <= task.data["target"] <= 100


def test_multiturn_feedback_and_discount():
    multiturn = TASKS["multiturn"]
    task = multiturn.tasks("test", 1)[0]
    right, wrong = f"The answer is {task.answer}.", f"The answer is {task.answer + 1}."
    assert multiturn.feedback(task, wrong, 1) == FEEDBACK == multiturn.feedback(task, wrong, 2)
    assert multiturn.feedback(task, wrong, 3) is None and multiturn.feedback(task, right, 1) is None
    assert multiturn.reward(task, right, turns=1) == 1.0
    assert multiturn.reward(task, right, turns=2) == pytest.approx(0.8)
    assert multiturn.reward(task, wrong, turns=3) == 0.0


def test_evaluate_and_calculator():
    assert evaluate("2 * (3 + 4) - 5") == (9, [2, 3, 4, 5])
    assert evaluate("-3 * -2") == (6, [3, 2])
    assert calculator("12*12") == "144"
    for bad in ["2 / 3", "2 **", "os.system('x')", "(1 + 2", "1 2", "9" * 13, "1+" * 150 + "1"]:
        assert calculator(bad).startswith("error:"), bad
        with pytest.raises(ExpressionError):
            evaluate(bad)
    assert CALCULATOR_TOOL["function"]["name"] == "calculator"
    assert CALCULATOR_TOOL["function"]["parameters"]["required"] == ["expression"]


@pytest.mark.parametrize("name", sorted(TASKS))
def test_generators_are_deterministic_and_splits_disjoint(name):
    spec = TASKS[name]
    train = spec.tasks("train", 300, seed=0)
    assert train == spec.tasks("train", 300, seed=0)
    assert train != spec.tasks("train", 300, seed=1)
    test = spec.tasks("test", 300, seed=0)
    assert {t.data["question"] for t in train}.isdisjoint(t.data["question"] for t in test)
    assert {t.split for t in train} == {"train"} and {t.split for t in test} == {"test"}
    assert len({t.id for t in train}) == 300 and all(t.dataset == name for t in train)
    messages = spec.messages(test[0])
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert messages[-1] == {"role": "user", "content": test[0].data["question"]}
    with pytest.raises(ValueError):
        spec.tasks("validation", 1)  # type: ignore[arg-type]


def test_calculator_task_is_large_enough_to_never_repeat():
    """make demo's task: a 640-episode run draws no problem twice and evaluates on at least
    200 distinct problems it never trains on."""
    spec = TASKS["calculator"]
    train = spec.tasks("train", 40 * 16, seed=0)
    test = spec.tasks("test", 200, seed=0)
    questions = {t.data["question"] for t in train}
    assert len(questions) == 640 and len({t.data["question"] for t in test}) == 200
    assert questions.isdisjoint(t.data["question"] for t in test)
    for t in train + test:
        a, op, b = t.data["expression"].split()
        assert 10 <= int(a) <= 99 and 10 <= int(b) <= 99 and op in "+-"
        assert spec.reward(t, f"The answer is {calculator(t.data['expression'])}.") == 1.0
        assert t.answer >= 0


def test_calling_the_calculator_is_the_headroom_on_two_digit_problems():
    """From memory the model gets few two-digit problems right and rarely calls the tool;
    made to call it, it copies the expression and the result: RL has the tool to find."""
    report = json.loads((tiny_model_path() / "training_report.json").read_text())
    greedy, sampled = report["greedy"]["add2tool"], report["sampled"]["add2tool"]
    assert greedy["forced_tool_accuracy"] >= 0.85 and sampled["forced_tool_accuracy"] >= 0.6
    assert greedy["accuracy"] <= 0.5 and 0.03 <= sampled["tool_call_rate"] <= 0.4
    assert greedy["well_formed"] >= 0.9  # the format is not the headroom here
