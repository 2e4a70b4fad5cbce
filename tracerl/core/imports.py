"""``module:function`` and ``path/file.py:function`` specs, as the CLI takes agents, rewards
and data functions: one loader, so the three say the same things the same way."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import ConfigError


def load_module(spec: str, target: str, what: str) -> Any:
    """The module ``target`` of ``spec`` (a ``what``: agent, reward, data): a dotted name, or
    a ``.py`` file, imported once (its folder put first on ``sys.path`` so it can import its
    neighbours, as a script would)."""
    if not target.endswith(".py"):
        try:
            return importlib.import_module(target)
        except ImportError as exc:
            raise ConfigError(f"{what} {spec!r}: module {target!r} cannot be imported: {exc}") from exc
    path = Path(target)
    if not path.is_file():
        raise ConfigError(f"{what} {spec!r}: file {path} does not exist (relative paths are from {Path.cwd()})")
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"tracerl_{what}_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    loader = importlib.util.spec_from_file_location(name, path)
    if loader is None or loader.loader is None:
        raise ConfigError(f"{what} {spec!r}: file {path} cannot be imported as Python")
    module = importlib.util.module_from_spec(loader)
    sys.modules[name] = module
    try:
        loader.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ConfigError(f"{what} {spec!r}: importing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def load_callable(spec: str, what: str) -> Callable[..., Any]:
    """The function ``spec`` names: ``module:function`` or ``path/file.py:function``."""
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        raise ConfigError(f"{what} {spec!r} must look like module:function or path/file.py:function")
    module = load_module(spec, target, what)
    fn = getattr(module, name, None)
    if fn is None:
        raise ConfigError(f"{what} {spec!r}: {target} has no function {name!r}")
    if not callable(fn):
        raise ConfigError(f"{what} {spec!r}: {target}.{name} is a {type(fn).__name__}, not a function")
    return fn
