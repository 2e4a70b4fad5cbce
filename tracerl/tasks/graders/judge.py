"""An LLM judge: a reward asked of any OpenAI-compatible Chat Completions endpoint.

    judge = make_judge("http://localhost:8000/v1", "Qwen/Qwen3-8B")
    judge(task, {"answer": "Paris"})            # {"reward": 1.0}

The rubric is filled in with the task's question, the answer and the reference, and sent as
one user message; the judge must end its reply with a line ``SCORE: <number>`` on the
rubric's scale (``scale=1``: 0 to 1; ``scale=10``: 0 to 10), and the reward is that score
divided by the scale. A judge that does not answer, or answers without a readable score in
range, raises :class:`~tracerl.core.errors.GradingError` with (the start of) its reply, so
the episode is marked ``grading_error`` rather than trained on a guess. A judge grades, it
does not verify: the result has no ``is_correct``.
"""

from __future__ import annotations

import json
import os
import re
import string
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from tracerl.core.errors import ConfigError, GradingError
from tracerl.core.types import Task

from .builtin import RewardFn, Rewards, answer_text

DEFAULT_RUBRIC = """You are grading an answer against a reference answer.

Question:
{question}

Reference answer:
{reference}

Answer to grade:
{answer}

Does the answer reach the same final result as the reference? Explain in one short sentence,
then end your reply with a line of exactly this form, with a number from 0 (wrong) to {scale} (correct):
SCORE: <number>"""

_FIELDS = ("question", "answer", "reference", "scale")
_SCORE_LINE = re.compile(r"^[\s*_#>`]*score[\s*_`]*[:=](?P<rest>.*)$", re.IGNORECASE)
_SCORE_VALUE = re.compile(
    r"[\s*_`]*(?P<num>[-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?:/\s*(?P<den>\d+(?:\.\d+)?))?[\s*_`]*\.?\s*"
)
Complete = Callable[[list[dict[str, str]]], str]


def _clip(reply: str | None) -> str:
    return repr((reply or "")[:200])


def parse_score(reply: str | None, scale: float = 1.0) -> float:
    """The score on the **last** ``SCORE:`` line of a judge's reply, in ``[0, scale]``.

    Lenient about form ("**Score:** 0.8", "score = 1.", "SCORE: 7/10" when the scale is 10),
    strict about meaning: no SCORE line, a last SCORE line that is not one number, a fraction
    over another scale ("7/10" on a 0-1 scale), or a number outside ``[0, scale]`` is a
    GradingError quoting the reply. The last line counts because a judge may quote the
    format, or reconsider, before its verdict.
    """
    lines = [m["rest"] for m in map(_SCORE_LINE.match, (reply or "").splitlines()) if m]
    if not lines:
        raise GradingError(f"the judge's reply has no 'SCORE: <0-{scale:g}>' line: {_clip(reply)}; make the "
                           "rubric ask for one, or give the judge more max_tokens if the reply was cut off")
    m = _SCORE_VALUE.fullmatch(lines[-1])
    if m is None:
        raise GradingError(f"the judge's last SCORE line is not one number ({lines[-1].strip()!r:.60}): "
                           f"{_clip(reply)}")
    if m["den"] is not None and float(m["den"]) != scale:
        raise GradingError(f"the judge scored out of {m['den']}, but the scale is 0-{scale:g}: {_clip(reply)}; "
                           f"pass scale={m['den']} or fix the rubric")
    score = float(m["num"])
    if not 0.0 <= score <= scale:
        raise GradingError(f"the judge's score {score:g} is outside 0-{scale:g}: {_clip(reply)}")
    return score


def question_of(task: Task) -> str:
    """The question shown to the judge: ``task.data["question"]`` when it is a string, else the
    first string field of ``task.data`` (the row's order: loaders keep the prompt column
    first), else "" (a rubric can still grade answer against reference)."""
    q = task.data.get("question")
    if isinstance(q, str):
        return q
    return next((v for v in task.data.values() if isinstance(v, str)), "")


def _check_rubric(rubric: str) -> set[str]:
    """The placeholders of ``rubric``; a template that cannot be filled in fails now, not per call."""
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(rubric) if name is not None}
    except ValueError as exc:
        raise ConfigError(f"judge rubric is not a valid template ({exc}); write literal braces as {{{{ }}}}") from exc
    unknown = sorted(n for n in names if n not in _FIELDS)
    if unknown:
        raise ConfigError(f"judge rubric uses unknown placeholder(s) {', '.join('{' + n + '}' for n in unknown)}; "
                          f"it can use {', '.join('{' + f + '}' for f in _FIELDS)} (literal braces: {{{{ }}}})")
    if "answer" not in names:
        raise ConfigError("judge rubric has no {answer} placeholder, so the judge would never see the answer")
    return names


def _openai_complete(base_url: str, model: str, key: str, temperature: float, max_tokens: int,
                     timeout_s: float, max_retries: int) -> Complete:
    import openai

    # One client per grader, shared by every call (and thread: it is thread-safe), so calls
    # reuse its connection pool.
    client = openai.OpenAI(base_url=base_url, api_key=key, timeout=timeout_s, max_retries=max_retries)

    def complete(messages: list[dict[str, str]]) -> str:
        try:
            resp = client.chat.completions.create(model=model, messages=messages,  # type: ignore[arg-type]
                                                  temperature=temperature, max_tokens=max_tokens)
        except openai.APIStatusError as exc:
            raise GradingError(f"the judge {model!r} at {base_url} answered HTTP {exc.status_code}: "
                               f"{_clip(exc.response.text)}") from exc
        except openai.APIError as exc:  # connection refused, timeout, a body that is not JSON
            raise GradingError(f"the judge {model!r} at {base_url} could not be reached: {exc}") from exc
        return (resp.choices[0].message.content or "") if resp.choices else ""
    return complete


def _urllib_complete(base_url: str, model: str, key: str, temperature: float, max_tokens: int,
                     timeout_s: float) -> Complete:
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}

    def complete(messages: list[dict[str, str]]) -> str:
        body = json.dumps({"model": model, "messages": messages, "temperature": temperature,
                           "max_tokens": max_tokens}).encode()
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as resp:
                doc = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            raise GradingError(f"the judge {model!r} at {base_url} answered HTTP {exc.code}: {_clip(text)}") from exc
        except (OSError, ValueError) as exc:
            raise GradingError(f"the judge {model!r} at {base_url} could not be reached or answered "
                               f"something that is not JSON: {exc}") from exc
        try:
            return str(doc["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError) as exc:
            raise GradingError(f"the judge {model!r} at {base_url} answered no message: {_clip(str(doc))}") from exc
    return complete


def _api_key(api_key: str | None, api_key_env: str | None) -> str:
    if api_key is not None:
        return api_key
    if api_key_env is not None:
        key = os.environ.get(api_key_env)
        if not key:
            raise ConfigError(f"judge: the environment variable {api_key_env} (api_key_env) is not set; "
                              "export the judge's API key in it, or pass api_key=")
        return key
    # Never OPENAI_API_KEY implicitly: base_url may be anyone's server. Local servers (vLLM,
    # the tracerl gateway) accept any key.
    return "EMPTY"


def make_judge(base_url: str, model: str, rubric: str = DEFAULT_RUBRIC, api_key: str | None = None,
               api_key_env: str | None = None, temperature: float = 0.0, max_tokens: int = 64,
               timeout_s: float = 60.0, scale: float = 1.0, max_retries: int = 2,
               field: str = "answer") -> RewardFn:
    """A reward asking ``model`` at ``base_url`` (an OpenAI-compatible ``.../v1``) to grade.

    ``rubric`` is a ``str.format`` template with ``{question}`` (:func:`question_of`),
    ``{answer}`` (``artifacts[field]``), ``{reference}`` (``task.answer``; a task without one
    is a GradingError when the rubric uses it) and ``{scale}``. The key is ``api_key``, else
    the environment variable named by ``api_key_env``, else none ("EMPTY").

    With the ``openai`` package installed, one ``OpenAI`` client is built here and shared by
    all calls; it retries ``max_retries`` times (default 2, with backoff, honouring
    Retry-After) on connection errors, 408, 409, 429 and 5xx, because one rate-limited call
    would otherwise cost its episode; ``timeout_s`` bounds each try. Without ``openai`` the
    standard library sends each call once.
    """
    if not re.match(r"https?://", base_url or ""):
        raise ConfigError(f"judge: base_url {base_url!r} must be an http(s) URL of an OpenAI-compatible API, "
                          "e.g. http://localhost:8000/v1")
    if not model:
        raise ConfigError("judge: model= is required (the model name the endpoint serves)")
    if not scale > 0:
        raise ConfigError(f"judge: scale={scale!r} must be positive (1 for 0-1 scores, 10 for 0-10)")
    uses_reference = "reference" in _check_rubric(rubric)
    key = _api_key(api_key, api_key_env)
    try:
        complete = _openai_complete(base_url, model, key, temperature, max_tokens, timeout_s, max_retries)
    except ImportError:
        complete = _urllib_complete(base_url, model, key, temperature, max_tokens, timeout_s)

    def judge(task: Task, artifacts: Any) -> Rewards:
        answer = answer_text(task, artifacts, field)
        if uses_reference and task.answer is None:
            raise GradingError(f"task {task.id!r} has no reference answer (task.answer is None), and the judge's "
                               "rubric shows one; give the data an answer column or a rubric without {reference}")
        prompt = rubric.format(question=question_of(task), answer=answer,
                               reference="" if task.answer is None else str(task.answer), scale=f"{scale:g}")
        reply = complete([{"role": "user", "content": prompt}])
        return {"reward": parse_score(reply, scale) / scale}
    return judge
