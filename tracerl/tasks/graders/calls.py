"""Function calls in a reply, and the two ways a reference grades them.

A call is ``{"name": str, "arguments": dict}``. :func:`parse_calls` reads the calls of a
reply, whichever way a model wrote them: Hermes/Qwen ``<tool_call>{...}</tool_call>`` blocks,
JSON (a list of calls, one call, xLAM's ``{"tool_calls": [...]}`` or OpenAI's
``{"function": {"name", "arguments": "<json>"}}``, bare or in a fenced block, or inside prose),
or BFCL's Python form ``[f(a=1), pkg.g(b=[1, 2])]``. Python is parsed, never evaluated.

Several final answers: the calls of a reply are its answer. A reply that writes different sets
of calls in different places (a fenced block, then another; a JSON list in its prose, then
another) states several answers, and reads as no calls at all (:func:`parse_calls` is None), so
it scores 0 whichever set would have matched; as many calls as expected is already required of
one set, so an extra call in the same list is wrong too.

* :func:`match_calls` is the xLAM rule of NeMo Gym's ``xlam_fc`` server: as many calls as
  expected, each expected call matched by a distinct call of the same name whose arguments
  hold every expected argument with an equal value (extra arguments are tolerated, order is
  not checked). Equality here keeps ``True`` apart from ``1``; numbers compare by value.
* :func:`ast_check` is BFCL's AST checker (``bfcl_eval/eval_checker/ast_eval/ast_checker.py``,
  Python categories), rewritten from its rules: the function's name (dots may be underscores,
  as OpenAI-style tool names need), every required parameter present, no parameter the
  function or the possible answer lacks, each value of the declared type (an int passes for a
  float; arrays check their items' type) and among the possible answers (strings compared
  without case, spaces or ``,./-_*^``; ``""`` among them marks a parameter that may be left out).
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any, NamedTuple

Call = dict[str, Any]  # {"name": str, "arguments": dict}

MAX_CHARS = 50_000  # a reply longer than this is not parsed for calls
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FENCE = re.compile(r"```[\w-]*\s*\n?(.*?)```", re.DOTALL)


# -- reading calls ----------------------------------------------------------------------------

def _one_call(obj: Any) -> Call | None:
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):  # OpenAI's {"type": "function", "function": {...}}
        obj = obj["function"]
    name = obj.get("name")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # OpenAI sends the arguments as a JSON string
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    if not isinstance(name, str) or not name or not isinstance(args, dict):
        return None
    return {"name": name, "arguments": args}


def calls_from_json(obj: Any) -> list[Call] | None:
    """The calls a decoded JSON value spells, or None if it is not a call or a list of them."""
    if isinstance(obj, dict) and isinstance(obj.get("tool_calls"), list):
        obj = obj["tool_calls"]
    items = obj if isinstance(obj, list) else [obj]
    calls = [_one_call(item) for item in items]
    if any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _json_calls(text: str) -> list[Call] | None:
    try:
        return calls_from_json(json.loads(text))
    except (ValueError, RecursionError):
        return None


def _one_reading(found: list[list[Call]]) -> list[Call] | None:
    """The calls written in several places of a reply, when they are the same calls each time;
    None when they differ (two different answers: none is picked) or when there are none."""
    distinct = {json.dumps(calls, sort_keys=True, default=str) for calls in found}
    return found[0] if len(distinct) == 1 else None


def _calls_in_prose(text: str) -> list[Call] | None:
    """The calls spelled by the JSON values inside ``text`` (a reply that explains itself), when
    every such value spells the same calls."""
    decoder, i = json.JSONDecoder(), 0
    found: list[list[Call]] = []
    while True:
        starts = [p for p in (text.find("[", i), text.find("{", i)) if p >= 0]
        if not starts:
            return _one_reading(found)
        i = min(starts)
        try:
            obj, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            i += 1
            continue
        calls = calls_from_json(obj)
        if calls:
            found.append(calls)
        i = end


def parse_calls(text: str | None) -> list[Call] | None:
    """The calls written in ``text`` (see the module docstring); None when it holds none.

    A ``</think>`` section is dropped first; a malformed ``<tool_call>`` block makes the whole
    reply unreadable (None) rather than leaving out one call. ``<tool_call>`` blocks are the
    calls of one answer together (parallel calls); calls written out in several other places
    (two fenced blocks, two JSON lists in prose) are one answer only when they are the same
    calls, else None: the reply gave several different answers, and none of them is picked."""
    if not text or len(text) > MAX_CHARS:
        return None
    text = text.split("</think>")[-1].strip()
    blocks = _TOOL_CALL.findall(text)
    if blocks:
        each = [_json_calls(b) for b in blocks]
        return None if any(c is None for c in each) else [x for c in each if c for x in c]
    fenced = [calls for block in _FENCE.findall(text) if (calls := _fenced_calls(block)) is not None]
    if fenced:
        return _one_reading(fenced)
    whole = _fenced_calls(text)
    return whole if whole is not None else _calls_in_prose(text)


def _fenced_calls(block: str) -> list[Call] | None:
    calls = _json_calls(block.strip())
    return calls if calls is not None else parse_python_calls(block)


# -- BFCL's Python form -----------------------------------------------------------------------

_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a ** b}


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _value(node: ast.expr) -> Any:
    """A literal argument as BFCL's ``resolve_ast_by_type`` reads it, without ``eval``: names
    and other expressions become their source text, arithmetic on numbers is computed."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Dict):
        return {_value(k) if k is not None else None: _value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _value(node.left), _value(node.right)
        numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (left, right))
        if numbers and not (isinstance(node.op, ast.Pow) and abs(right) > 64):  # no 10**10**10
            try:
                return _BINOPS[type(node.op)](left, right)
            except (ArithmeticError, ValueError):
                pass
    if isinstance(node, ast.Call) and node.keywords:
        return _call(node)
    return ast.unparse(node)


def _call(node: ast.Call) -> Call | None:
    name = _dotted(node.func)
    if name is None or any(k.arg is None for k in node.keywords):
        return None
    # Positional arguments are dropped as BFCL drops them: the call then lacks the parameter.
    return {"name": name, "arguments": {k.arg: _value(k.value) for k in node.keywords if k.arg}}


def parse_python_calls(text: str) -> list[Call] | None:
    """Calls in BFCL's prompting format, ``[f(a=1), g(b="x")]`` (brackets optional)."""
    source = text.strip().strip("`").strip()
    if not source or len(source) > MAX_CHARS:
        return None
    if not source.startswith("["):
        source = f"[{source}]"
    try:
        body = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    elements = body.elts if isinstance(body, (ast.List, ast.Tuple)) else [body]
    if not elements or not all(isinstance(e, ast.Call) for e in elements):
        return None
    try:
        calls = [_call(e) for e in elements if isinstance(e, ast.Call)]
    except (RecursionError, TypeError):  # TypeError: an unhashable dict key
        return None
    return None if any(c is None for c in calls) else [c for c in calls if c is not None]


# -- xLAM: NeMo Gym's rule ---------------------------------------------------------------------

def same_value(a: Any, b: Any) -> bool:
    """``a == b`` for JSON values, except that a bool equals only a bool and a tuple is a list."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def call_covers(predicted: Call, expected: Call) -> bool:
    """Same name, and every expected argument present with an equal value."""
    args = predicted["arguments"]
    return predicted["name"] == expected["name"] and all(
        k in args and same_value(args[k], v) for k, v in expected["arguments"].items())


def match_calls(predicted: list[Call] | None, expected: list[Call]) -> bool:
    """NeMo Gym's xlam_fc reward (see the module docstring), with a full matching rather than
    a greedy one: a call that could cover two expected calls is given to the one that needs it."""
    if predicted is None or len(predicted) != len(expected):
        return False
    owner: dict[int, int] = {}  # predicted index -> expected index

    def assign(i: int, seen: set[int]) -> bool:  # Kuhn's augmenting path
        for j, call in enumerate(predicted):
            if j not in seen and call_covers(call, expected[i]):
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(assign(i, set()) for i in range(len(expected)))


# -- BFCL's AST checker -----------------------------------------------------------------------

class Verdict(NamedTuple):
    valid: bool
    error: str = ""


OK = Verdict(True)
PYTHON_TYPES: dict[str, type[Any]] = {"string": str, "integer": int, "float": float, "boolean": bool,
                                 "array": list, "tuple": list, "dict": dict, "any": str}
_STRIP = re.compile(r"[ ,./\-_*^]")


def standardize(text: str) -> str:
    """BFCL's string normal form: no spaces or ``,./-_*^``, lower case, ``'`` as ``"``."""
    return _STRIP.sub("", text).lower().replace("'", '"')


def _answer_type(possible: list[Any]) -> type[Any] | None:
    return next((type(p) for p in possible if p != ""), None)


def _type_ok(value: Any, possible: list[Any], expected: type[Any], nested: type[Any] | None) -> tuple[bool, bool]:
    """BFCL's ``type_checker``: (type is right, value is a "variable", i.e. typed as the possible
    answers are rather than as the function declares)."""
    answer_type = _answer_type(possible)
    variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return True, variable
        for item in possible:  # an optional "" passes: BFCL only checks the list answers
            if type(item) is not list or all(_type_ok(v, item, nested, None)[0] for v in value):
                return True, variable
        return False, False
    if answer_type is not None and type(value) is answer_type:
        return True, True
    return False, False


def _std(value: Any) -> Any:
    return standardize(value) if type(value) is str else value


def _dict_ok(value: dict[str, Any], possible: list[Any]) -> bool:
    for answer in possible:
        if answer == "" or not isinstance(answer, dict):
            continue
        known = all(k in answer and _std(v) in [_std(a) for a in answer[k]] for k, v in value.items())
        if known and all(k in value or "" in vals for k, vals in answer.items()):
            return True
    return False


def _value_ok(value: Any, possible: list[Any], expected: type[Any], nested: type[Any] | None) -> bool:
    if expected is dict:
        return _dict_ok(value, possible)
    if expected is list and nested is dict:
        return any(isinstance(answer, list) and len(answer) == len(value)
                   and all(isinstance(v, dict) and _dict_ok(v, [a]) for v, a in zip(value, answer))
                   for answer in possible)
    if expected is str:
        return standardize(value) in [standardize(p) for p in possible if type(p) is str]
    if expected is list:  # "" among the answers lets [] through, as BFCL's list_checker does
        return [_std(v) for v in value] in [[_std(x) for x in p] for p in possible if isinstance(p, (list, str))]
    return value in possible


def _param_ok(name: str, value: Any, spec: dict[str, Any], possible: list[Any]) -> Verdict:
    declared = spec.get("type")
    expected = PYTHON_TYPES.get(declared) if isinstance(declared, str) else None
    if expected is None:
        return Verdict(False, f"parameter {name!r} has a type the checker does not know: {declared!r}")
    items = spec.get("items")
    item_type = items.get("type") if isinstance(items, dict) else None
    nested = PYTHON_TYPES.get(item_type) if declared in ("array", "tuple") and isinstance(item_type, str) else None
    if declared == "tuple" and type(value) is tuple:
        value = list(value)
    if declared == "float" and type(value) is int:  # Python's int -> float promotion
        value = float(value)
    type_ok, variable = _type_ok(value, possible, expected, nested)
    if not type_ok:
        return Verdict(False, f"parameter {name!r}: {value!r} is not of type {declared}")
    fits = value in possible if variable else _value_ok(value, possible, expected, nested)
    return OK if fits else Verdict(False, f"parameter {name!r}: {value!r} is not among {possible!r}")


def check_call(function: dict[str, Any], call: Call, answer: dict[str, dict[str, list[Any]]]) -> Verdict:
    """One call against one possible answer ``{name: {param: [accepted values]}}``."""
    expected_name, possible = next(iter(answer.items()))
    if call["name"] not in (expected_name, expected_name.replace(".", "_")):
        return Verdict(False, f"called {call['name']!r}, expected {expected_name!r}")
    params = function.get("parameters") or {}
    properties, args = params.get("properties") or {}, call["arguments"]
    missing = [p for p in params.get("required") or [] if p not in args]
    if missing:
        return Verdict(False, f"missing required parameter {missing[0]!r}")
    for name, value in args.items():
        if name not in properties or name not in possible:
            return Verdict(False, f"unexpected parameter {name!r}")
        verdict = _param_ok(name, value, properties[name], possible[name])
        if not verdict.valid:
            return verdict
    left_out = [p for p, vals in possible.items() if p not in args and "" not in vals]
    return Verdict(False, f"parameter {left_out[0]!r} is not optional") if left_out else OK


def ast_check(functions: list[dict[str, Any]], calls: list[Call] | None,
              ground_truth: list[dict[str, Any]]) -> Verdict:
    """BFCL's AST verdict on ``calls`` for a row's ``function`` list and ``ground_truth``: as
    many calls as expected, matched in any order (simple, multiple and parallel categories)."""
    if calls is None:
        return Verdict(False, "no function call found")
    if len(calls) != len(ground_truth):
        return Verdict(False, f"{len(calls)} calls, expected {len(ground_truth)}")
    by_name = {f.get("name"): f for f in functions}
    unmatched = list(range(len(calls)))
    for answer in ground_truth:  # BFCL's parallel_function_checker_no_order: first fit wins
        function = by_name.get(next(iter(answer)))
        if function is None:
            return Verdict(False, f"no function {next(iter(answer))!r} is declared")
        verdicts = [(i, check_call(function, calls[i], answer)) for i in unmatched]
        fit = next((i for i, v in verdicts if v.valid), None)
        if fit is None:
            return verdicts[0][1] if len(verdicts) == 1 else Verdict(False, f"no call matches {answer!r}")
        unmatched.remove(fit)
    return OK
