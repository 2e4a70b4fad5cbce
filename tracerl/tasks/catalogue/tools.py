"""Tool use (function calling): xLAM's 60k APIGen queries and BFCL's ``simple`` category.

The model gets a query and the row's functions, offered as OpenAI ``tools`` (converted to
JSON Schema), and answers with calls. Its default agent, :func:`call_agent`, sends one chat
turn and grades the calls of that reply: real tool calls, written out as a JSON list, or the
calls written in the text (JSON, ``<tool_call>`` blocks, BFCL's ``[f(a=1)]``; see
:mod:`tracerl.tasks.graders.calls`). No function is executed: the calls are the answer.

* ``xlam``: NeMo Gym's xlam_fc rule: as many calls as the reference, each matched (in any
  order) by a call of the same name holding every reference argument with an equal value.
* ``bfcl``: BFCL's AST checker (:func:`~tracerl.tasks.graders.calls.ast_check`): name, required
  parameters, no unknown parameter, each value typed and among the possible answers.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, ClassVar

from tracerl.core.errors import ConfigError
from tracerl.core.types import Task

from ..benchmarks import Benchmark
from ..graders.calls import Call, ast_check, match_calls, parse_calls
from ..loaders import Hub, load_rows

AGENT = "tracerl.tasks.catalogue.tools:call_agent"
# NeMo Gym's xlam_fc system prompt, plus the text form for a model served without tools.
SYSTEM_PROMPT = ("You are a helpful AI assistant with access to various functions. When you need to "
                 "use a function, call the appropriate function with the correct arguments. You can "
                 "call multiple functions if needed. If you cannot use tools, reply with the calls as a "
                 'JSON list: [{"name": ..., "arguments": {...}}].')

# xLAM writes Python-ish types ("str", "List[int]", "int, optional"); NeMo Gym maps them so,
# anything else to "string".
_XLAM_TYPES = {"str": "string", "string": "string", "int": "integer", "integer": "integer",
               "float": "number", "number": "number", "bool": "boolean", "boolean": "boolean",
               "list": "array", "tuple": "array", "set": "array", "dict": "object", "object": "object"}
# BFCL's type names -> JSON Schema (bfcl_eval constants/type_mappings.py GORILLA_TO_OPENAPI).
_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}


def _json_type(spec: str) -> dict[str, Any]:
    """An xLAM type string as a JSON Schema type: "List[int]" -> array of integer."""
    text = spec.split(",")[0].strip() if spec.lower().endswith("optional") else spec.strip()
    match = re.fullmatch(r"(\w+)\s*(?:\[(.*)\])?", text)
    if match is None:
        return {"type": "string"}
    outer, inner = match.group(1).lower(), match.group(2)
    schema: dict[str, Any] = {"type": _XLAM_TYPES.get(outer, "string")}
    if schema["type"] == "array" and inner and "," not in inner:
        schema["items"] = _json_type(inner)
    return schema


def xlam_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """One xLAM tool as an OpenAI tool; a parameter without a ``default`` is required (NeMo Gym)."""
    properties, required = {}, []
    for name, spec in (tool.get("parameters") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        prop = {**_json_type(str(spec.get("type") or "str")), "description": str(spec.get("description") or "")}
        if "default" in spec:
            prop["default"] = spec["default"]
        else:
            required.append(name)
        properties[name] = prop
    return {"type": "function", "function": {
        "name": tool["name"], "description": str(tool.get("description") or ""),
        "parameters": {"type": "object", "properties": properties, "required": required}}}


def bfcl_schema(schema: Any) -> Any:
    """BFCL's parameter schema in JSON Schema's type names, recursively."""
    if isinstance(schema, list):
        return [bfcl_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bfcl_schema(v) for k, v in schema.items()}
    if isinstance(schema.get("type"), str):
        out["type"] = _BFCL_TYPES.get(schema["type"], schema["type"])
    return out


def bfcl_tool(function: dict[str, Any]) -> dict[str, Any]:
    """One BFCL function as an OpenAI tool; dots become underscores (OpenAI tool names cannot
    hold dots; BFCL's FC handlers do the same and its checker accepts either)."""
    return {"type": "function", "function": {
        "name": function["name"].replace(".", "_"), "description": str(function.get("description") or ""),
        "parameters": bfcl_schema(function.get("parameters") or {"type": "dict", "properties": {}})}}


def reply_of(message: dict[str, Any]) -> str:
    """What is graded of an assistant message: its tool calls as a JSON list of ``{"name",
    "arguments"}`` (arguments that are not JSON kept as text, which no grader accepts), else
    its text."""
    calls = message.get("tool_calls") or []
    if not calls:
        return str(message.get("content") or "")
    out = []
    for call in calls:
        function = call.get("function") or {}
        raw = function.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            args = raw
        out.append({"name": function.get("name"), "arguments": args if args is not None else {}})
    return json.dumps(out)


def call_agent(task: Task, config: Any) -> dict[str, Any]:
    """The default agent of the tool-use benchmarks: one chat turn with the row's tools; the
    reply's calls (:func:`reply_of`) are graded. Plain function: ``load_agent`` wraps it."""
    from .. import get
    from ..agents import chat_client, chat_turn

    spec = get(task.dataset or "")
    with chat_client(config) as http:
        message = chat_turn(http, config, spec.messages(task), spec.tools(task), 0)
    return spec.source.rewards(task, reply_of(message))


class ToolBenchmark(Benchmark):
    domain = "tool-use"
    default_agent = AGENT
    tool_names = ("the row's functions",)  # each row brings its own (tools()); shown by `tasks show`

    def call_tool(self, task: Task, name: str, arguments: dict[str, Any]) -> str:
        # The calls are the answer: nothing runs (call_agent grades the first reply's calls).
        return "error: the functions of this task are not executed; the calls are graded"


class XLAM(ToolBenchmark):
    """Salesforce/xlam-function-calling-60k: APIGen queries with their tools and reference calls
    (``answers``, often several). Gated on the hub: accept its terms and log in first."""

    name = "xlam"
    hub = Hub("Salesforce/xlam-function-calling-60k", ("dataset",))
    splits: ClassVar[dict[str, str]] = {"train": "train", "test": "train"}  # one split: 80/20 by id hash
    id_key = "id"
    question_key = "query"
    grader = ("NeMo Gym's xlam_fc rule: as many calls as the answers, each matched in any order by a "
              "call of the same name with every expected argument equal")
    description = "function calling over APIGen tools (Salesforce/xlam-function-calling-60k, gated); calls graded"

    def reference(self, row: dict[str, Any]) -> list[Call]:
        return json.loads(row["answers"])

    def tools(self, task: Task) -> list[dict[str, Any]]:
        return [xlam_tool(t) for t in json.loads(task.data["tools"])]

    def messages(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.data["query"]}]

    def is_correct(self, task: Task, text: str | None) -> bool:
        calls = parse_calls(text)
        if not task.answer:  # no call expected: any reply that makes none
            return bool(text and text.strip()) and not calls
        return match_calls(calls, task.answer)

    def solution(self, task: Task) -> str | None:
        return json.dumps(task.answer)


class BFCL(ToolBenchmark):
    """BFCL v3 ``simple`` (gorilla-llm/Berkeley-Function-Calling-Leaderboard): one function, one
    call. The questions and their possible answers are separate files, joined by ``id`` in
    :meth:`hub_rows`: each row is the question's declared columns plus ``ground_truth``."""

    name = "bfcl"
    # The hub repo is raw JSON-lines files; the declared snapshot is f087fb1, whose full sha is
    # unknown, so the files are read from main.
    hub = Hub("gorilla-llm/Berkeley-Function-Calling-Leaderboard", ("questions",),
              files={"test": ("BFCL_v3_simple.json",)})
    answer_hub = Hub("gorilla-llm/Berkeley-Function-Calling-Leaderboard", ("possible_answer",),
                  files={"test": ("possible_answer/BFCL_v3_simple.json",)})
    splits: ClassVar[dict[str, str]] = {"test": "test"}
    id_key = "id"
    grader = ("BFCL's AST checker: the function's name, required parameters present, no unknown "
              "ones, each value of its type and among the possible answers")
    description = "BFCL v3 simple function calls (gorilla-llm/Berkeley-Function-Calling-Leaderboard); AST check; eval only"

    def hub_rows(self, hub_split: str, path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
        if path is not None and Path(path).is_file():
            raise ConfigError(f"{self.name}: its rows are two files; point path= at a folder with "
                              f"{hub_split}.jsonl and possible_answer/{hub_split}.jsonl")
        questions = load_rows(self.name, self.hub, hub_split, path)
        # The answers sit beside the questions, in possible_answer/ (as in the hub repo).
        answers = {a["id"]: a["ground_truth"] for a in
                   load_rows(f"{self.name}/possible_answer", self.answer_hub, hub_split, path)}
        lost = [q["id"] for q in questions if q["id"] not in answers]
        if lost:
            raise ConfigError(f"{self.name}: {len(lost)} questions have no possible answer (first: {lost[0]})")
        return [{**q, "ground_truth": answers[q["id"]]} for q in questions]

    def reference(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        return row["ground_truth"]

    def problem_text(self, row: dict[str, Any]) -> str:
        turns = row.get("question") or [[]]
        return " ".join(m["content"] for m in turns[0] if m.get("role") == "user")

    def tools(self, task: Task) -> list[dict[str, Any]]:
        return [bfcl_tool(f) for f in task.data["function"]]

    def messages(self, task: Task) -> list[dict[str, Any]]:
        # BFCL's FC mode: the first turn as it is, the functions as tools, no system prompt added.
        return [{"role": m["role"], "content": m["content"]} for m in task.data["question"][0]]

    def is_correct(self, task: Task, text: str | None) -> bool:
        return ast_check(task.data["function"], parse_calls(text), task.answer).valid

    def solution(self, task: Task) -> str | None:
        calls = []
        for answer in task.answer:
            name, params = next(iter(answer.items()))
            args = {p: next(v for v in values if v != "") for p, values in params.items()
                    if any(v != "" for v in values)}
            calls.append({"name": name, "arguments": args})
        return json.dumps(calls)


BENCHMARKS: tuple[type[Benchmark], ...] = (XLAM, BFCL)
