"""Reward functions kept outside the app, and how a spec string becomes one.

    fn = resolve_reward("numeric")                       # a built-in, see GRADERS
    fn = resolve_reward("regex", pattern=r"Answer: (-?\\d+)$")
    fn = resolve_reward("my_rewards:format_reward")      # module:function
    fn = resolve_reward("rewards.py:score")              # path/to/file.py:function
    fn(task, {"answer": "12"})                           # {"reward": 1.0, "is_correct": True}

A reward function is ``fn(task, episode) -> float | bool | dict[str, float | bool]``:
``task`` is the :class:`~tracerl.core.types.Task` (``task.answer`` the reference,
``task.data`` the row) and ``episode`` a :class:`GradedEpisode`: the assembled episode
(``episode.steps``, for rewards on the whole trajectory: tool calls, turns, length) that also
reads as the mapping of what the agent returned (``episode["answer"]``; a string ``s`` is
``{"answer": s}``), whatever the parameter is named. A dict names its rewards, ``"reward"``
the main one, plus an optional ``"is_correct"``, which accuracy counts (without it, a reward
that reaches ``reward_max``, default 1, counts as correct). :func:`normalize` turns any
return into named rewards.

Built-ins (:mod:`.builtin`, :mod:`.judge`): exact, numeric, math, regex, contains, json, code,
judge. The older task-specific graders stay in :mod:`.math` and :mod:`.code`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, overload

from tracerl.core.errors import ConfigError
from tracerl.core.grading import GradedEpisode, normalize
from tracerl.core.imports import load_callable

from .builtin import (
    RewardFn,
    make_code,
    make_contains,
    make_exact,
    make_json,
    make_math,
    make_numeric,
    make_regex,
)
from .judge import make_judge

GRADERS: dict[str, Callable[..., RewardFn]] = {
    "exact": make_exact,
    "numeric": make_numeric,
    "math": make_math,
    "regex": make_regex,
    "contains": make_contains,
    "json": make_json,
    "code": make_code,
    "judge": make_judge,
}

__all__ = ["GRADERS", "GradedEpisode", "RewardFn", "normalize", "resolve_reward", "reward", "reward_name"]

_NAME_ATTR = "__tracerl_reward_name__"  # read by tracerl.core.grading.Grader.of


def reward_name(fn: Callable[..., Any]) -> str:
    """The name a float returned by ``fn`` is keyed by: ``@reward(name=...)``'s, else "reward"."""
    return str(getattr(fn, _NAME_ATTR, "reward"))


def _check_signature(fn: Callable[..., Any], what: str) -> None:
    """A reward function is called as ``fn(task, artifacts)``: refuse one that cannot be now,
    not at the first episode. Bound methods and ``functools.partial`` are seen through."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return
    try:
        sig.bind(object(), object())
    except TypeError as exc:
        raise ConfigError(f"reward {what}: {getattr(fn, '__name__', type(fn).__name__)}{sig} cannot be called as "
                          f"fn(task, artifacts) ({exc}); a reward function takes (task, artifacts) or "
                          "(task, episode)") from None


@overload
def reward(fn: Callable[..., Any], *, name: str = "reward") -> Callable[..., Any]: ...
@overload
def reward(fn: None = None, *, name: str = "reward") -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...


def reward(fn: Callable[..., Any] | None = None, *, name: str = "reward") -> Any:
    """Mark ``fn(task, artifacts)`` as a reward function: ``@tracerl.reward`` or
    ``@tracerl.reward(name="format")``. A float it returns is keyed by ``name`` (a dict keeps
    its own keys); the signature is checked now. The function itself is returned, unchanged
    but for the ``__tracerl_reward_name__`` attribute, so it can still be called and tested."""
    if not isinstance(name, str) or not name or name == "is_correct":
        raise ConfigError(f"@reward(name={name!r}): the name must be a non-empty string other than 'is_correct'")

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(f):
            raise ConfigError(f"@reward decorates a function, not a {type(f).__name__}")
        _check_signature(f, repr(getattr(f, "__qualname__", f)))
        try:
            setattr(f, _NAME_ATTR, name)
        except AttributeError:  # a bound method or builtin takes no attributes: wrap it
            wrapper = functools.wraps(f)(functools.partial(f))
            setattr(wrapper, _NAME_ATTR, name)
            return wrapper
        return f
    return mark if fn is None else mark(fn)


def _builtin(spec: str, options: dict[str, Any]) -> RewardFn:
    factory = GRADERS[spec]
    params = inspect.signature(factory).parameters
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise ConfigError(f"reward {spec!r} has no option {', '.join(map(repr, unknown))}; its options: "
                          f"{', '.join(params)}")
    missing = [n for n, p in params.items() if p.default is p.empty and n not in options]
    if missing:
        raise ConfigError(f"reward {spec!r} needs the option(s) {', '.join(missing)}; its options: "
                          f"{', '.join(params)}")
    return factory(**options)


def resolve_reward(spec: str | Callable[..., Any], **options: Any) -> RewardFn:
    """A reward function from a spec: a built-in name (``options`` go to its factory, see
    :data:`GRADERS`), ``"module:function"``, ``"path/to/file.py:function"``, or a callable.

    Every problem is a one-line :class:`ConfigError` naming the spec: an unknown name (the
    built-ins are listed), a module that does not import, a missing file, no such function,
    something not callable, a function that cannot be called as ``fn(task, artifacts)``, or
    options given to anything but a built-in (bind those with ``functools.partial``).
    """
    if callable(spec) and not isinstance(spec, str):
        if options:
            raise ConfigError(f"reward {spec!r}: options ({', '.join(sorted(options))}) are only for the built-in "
                              "rewards; bind them to your function with functools.partial")
        _check_signature(spec, repr(spec))
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"reward {spec!r} must be a built-in name ({', '.join(GRADERS)}), module:function, "
                          "path/file.py:function, or a function")
    spec = spec.strip()
    if spec in GRADERS:
        return _builtin(spec, options)
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        raise ConfigError(f"unknown reward {spec!r}; the built-in rewards are {', '.join(GRADERS)}, or give "
                          "module:function or path/file.py:function")
    if options:
        raise ConfigError(f"reward {spec!r} takes no options (got {', '.join(sorted(options))}): options are only "
                          "for the built-in rewards; bind them in your module (functools.partial)")
    fn = load_callable(spec, "reward")
    _check_signature(fn, repr(spec))
    return fn
