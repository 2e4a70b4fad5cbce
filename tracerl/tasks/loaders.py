"""Rows of a real benchmark: from a local file or folder, else from the Hugging Face Hub.

Where the rows of ``name``'s hub split ``split`` come from, first match wins:

1. ``path=`` given to :func:`load_rows` (``spec.tasks(..., path=...)``): a JSONL/JSON/Parquet
   file (used for every split), or a folder holding ``<split>.jsonl`` / ``<split>.parquet`` /
   ``<split>/*.{jsonl,parquet}`` / ``<split>-*.parquet``, directly or under ``<name>/``.
2. ``$TRACERL_DATA_DIR/<name>/`` laid out the same way, if that folder exists.
3. ``datasets.load_dataset(hub.id, config, split=split, **hub.kwargs)`` (``pip install
   'tracerl[tasks]'``), which works offline too once the dataset is in the HF cache.

Otherwise a one-line :class:`~tracerl.core.errors.ConfigError` says how to fix it. Files are
named after the *hub* split (``hotpotqa/validation.jsonl``), which is what
``load_dataset(...)[split].to_json(f"{split}.jsonl")`` writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracerl.core.errors import ConfigError

DATA_DIR_ENV = "TRACERL_DATA_DIR"
_SUFFIXES = (".jsonl", ".json", ".parquet")


@dataclass(frozen=True)
class Hub:
    """Where a benchmark lives on the Hugging Face Hub. Several ``configs`` are concatenated."""

    id: str
    configs: tuple[str | None, ...] = (None,)
    kwargs: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        configs = [c for c in self.configs if c]
        return f"'{self.id}'" + (f" ({', '.join(configs)})" if configs else "")


def read_file(path: Path) -> list[dict[str, Any]]:
    """Rows of one JSON-lines, JSON-array, CSV or Parquet file (the user's data reader)."""
    from .data import read_rows

    return read_rows(path)


def _split_files(folder: Path, split: str) -> list[Path]:
    for suffix in _SUFFIXES:
        if (folder / f"{split}{suffix}").is_file():
            return [folder / f"{split}{suffix}"]
    if (folder / split).is_dir():
        return sorted(p for p in (folder / split).iterdir() if p.suffix in _SUFFIXES)
    return sorted(folder.glob(f"{split}-*.parquet"))


def local_files(name: str, split: str, path: str | os.PathLike[str]) -> list[Path]:
    """The files holding ``split`` under ``path`` (see the module docstring); [] if none."""
    root = Path(path).expanduser()
    if root.is_file():
        return [root]
    for folder in (root / name, root):
        if folder.is_dir():
            found = _split_files(folder, split)
            if found:
                return found
    return []


def _save_hint(name: str, hub: Hub, split: str, config: str | None) -> str:
    """A one-liner that saves the split where TRACERL_DATA_DIR=data will find it."""
    many = len(hub.configs) > 1
    target = f"data/{name}/{split}/{config}.jsonl" if many else f"data/{name}/{split}.jsonl"
    args = [repr(hub.id), *([repr(config)] if config else []), f"split={split!r}",
            *(f"{k}={v!r}" for k, v in hub.kwargs.items())]
    each = " (once per config)" if many else ""
    return (f"python -c \"import datasets; datasets.load_dataset({', '.join(args)})"
            f".to_json('{target}')\"{each} and set {DATA_DIR_ENV}=data (or pass path=)")


def _from_hub(name: str, hub: Hub, split: str) -> list[dict[str, Any]]:
    try:
        import datasets
    except ImportError:
        raise ConfigError(f"{name}: no local data and the 'datasets' package is not installed; "
                          f"pip install 'tracerl[tasks]', or point {DATA_DIR_ENV} at a folder with "
                          f"{name}/{split}.jsonl (or .parquet), or pass path=") from None
    rows: list[dict[str, Any]] = []
    for config in hub.configs:
        try:
            rows += datasets.load_dataset(hub.id, config, split=split, **hub.kwargs).to_list()
        except Exception as exc:  # offline, missing from the cache, renamed: all one fix
            reason = " ".join(str(exc).split())[:160]
            raise ConfigError(
                f"{name}: the dataset {hub.describe()} split '{split}' is not reachable "
                f"({type(exc).__name__}: {reason}); run once with network to fill the HF cache, "
                f"or save it: {_save_hint(name, hub, split, config)}"
            ) from None
    return rows


def load_rows(name: str, hub: Hub, split: str, path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """All rows of ``name``'s hub split ``split``, as plain dicts in the dataset's own schema."""
    if path is not None:
        files = local_files(name, split, path)
        if not files:
            raise ConfigError(f"{name}: no {split}.jsonl, {split}.parquet or {split}/ under {path} "
                              f"(nor under {Path(path) / name})")
        return [row for f in files for row in read_file(f)]
    data_dir = os.environ.get(DATA_DIR_ENV)
    if data_dir and (Path(data_dir) / name).is_dir():
        files = local_files(name, split, Path(data_dir) / name)
        if not files:
            raise ConfigError(f"{name}: {Path(data_dir) / name} has no {split}.jsonl, "
                              f"{split}.parquet or {split}/ folder")
        return [row for f in files for row in read_file(f)]
    return _from_hub(name, hub, split)
