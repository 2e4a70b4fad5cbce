"""Rows of a real benchmark: from a local file or folder, else from the Hugging Face Hub.

Where the rows of ``name``'s hub split ``split`` come from, first match wins:

1. ``path=`` given to :func:`load_rows` (``spec.tasks(..., path=...)``): a JSONL/JSON/Parquet
   file (used for every split), or a folder holding ``<split>.jsonl`` / ``<split>.parquet`` /
   ``<split>/*.{jsonl,parquet}`` / ``<split>-*.parquet`` / a ``save_to_disk`` folder
   ``<split>/``, directly or under ``<name>/``.
2. ``$TRACERL_DATA_DIR/<name>/`` laid out the same way, if that folder exists.
3. ``datasets.load_dataset(hub.id, config, split=split, **hub.kwargs)`` (``pip install
   'tracerl[tasks]'``), which works offline too once the dataset is in the HF cache.

Local files are read by ``datasets`` too (its json and parquet builders, or
``load_from_disk``), and every row, local or from the hub, is conformed to the features the
dataset declares (:mod:`~tracerl.tasks.catalogue.schema`): a missing column or a value of
another type is one :class:`~tracerl.core.errors.ConfigError` line naming the file and column.
Files are named after the *hub* split (``hotpotqa/validation.jsonl``), which is what
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
    """Where a benchmark lives on the Hugging Face Hub. Several ``configs`` are concatenated.

    ``kwargs`` go to ``load_dataset`` as they are (``revision``). ``files`` maps a hub split to
    the repository's data files (globs) for a dataset whose repository still holds a loading
    script, which ``datasets`` 4 and later refuse to run: those files are read by the ``json``
    (or ``builder``) loader from ``hf://datasets/<id>@<revision>/...``, with the declared
    features (JSON lists of objects with different keys are inferred wrongly otherwise)."""

    id: str
    configs: tuple[str | None, ...] = (None,)
    kwargs: dict[str, Any] = field(default_factory=dict)
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    builder: str = "json"

    def load_args(self, config: str | None, split: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments of ``datasets.load_dataset`` for ``config``'s ``split``."""
        if not self.files:
            return (self.id, config), {"split": split, **self.kwargs}
        if split not in self.files:
            raise ConfigError(f"{self.id}: no data files are known for split {split!r} "
                              f"(known: {', '.join(sorted(self.files))})")
        revision = self.kwargs.get("revision", "main")
        paths = [f"hf://datasets/{self.id}@{revision}/{p}" for p in self.files[split]]
        extra = {k: v for k, v in self.kwargs.items() if k != "revision"}
        return (self.builder,), {"data_files": {split: paths}, "split": split, **extra}

    def describe(self) -> str:
        configs = [c for c in self.configs if c]
        return f"'{self.id}'" + (f" ({', '.join(configs)})" if configs else "")


def _split_files(folder: Path, split: str) -> list[Path]:
    for suffix in _SUFFIXES:
        if (folder / f"{split}{suffix}").is_file():
            return [folder / f"{split}{suffix}"]
    if (folder / split).is_dir():
        if (folder / split / "state.json").is_file():  # Dataset.save_to_disk
            return [folder / split]
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
    try:
        positional, keywords = hub.load_args(config, split)
    except ConfigError:
        positional, keywords = (hub.id, config), {"split": split}
    args = [repr(a) for a in positional if a is not None] + [f"{k}={v!r}" for k, v in keywords.items()]
    each = " (once per config)" if many else ""
    return (f"python -c \"import datasets; datasets.load_dataset({', '.join(args)})"
            f".to_json('{target}')\"{each} and set {DATA_DIR_ENV}=data (or pass path=)")


def _datasets(name: str, split: str | None) -> Any:
    """The datasets module; ``split`` None when the rows are local (a fix less to offer)."""
    try:
        import datasets
    except ImportError:
        if split is None:
            raise ConfigError(f"{name}: reading its local files needs the 'datasets' package; "
                              f"pip install 'tracerl[tasks]'") from None
        raise ConfigError(f"{name}: no local data and the 'datasets' package is not installed; "
                          f"pip install 'tracerl[tasks]', or point {DATA_DIR_ENV} at a folder with "
                          f"{name}/{split}.jsonl (or .parquet), or pass path=") from None
    return datasets


def _unreachable(name: str, hub: Hub, split: str, config: str | None, exc: Exception) -> ConfigError:
    reason = " ".join(str(exc).split())[:160]
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        why = "HF_HUB_OFFLINE is set and it is not in the HF cache"
        fix = "unset HF_HUB_OFFLINE on a machine with network to fill the cache"
    else:
        why = f"it could not be loaded ({type(exc).__name__}: {reason}; HF_HUB_OFFLINE is not set)"
        fix = "check the network or the dataset's access terms, fill the HF cache"
    return ConfigError(f"{name}: the dataset {hub.describe()} split '{split}' is not reachable: {why}; "
                       f"{fix}, or save it: {_save_hint(name, hub, split, config)}")


def _features(hub: Hub, config: str | None) -> Any | None:
    """The declared features of ``hub``'s ``config``, or None for a dataset with no declaration."""
    from .catalogue.schema import declared, schema_path

    if not schema_path(hub.id).is_file():
        return None
    return declared(hub.id).features(config)


def _from_hub(name: str, hub: Hub, split: str) -> list[dict[str, Any]]:
    from .catalogue.schema import conform

    datasets = _datasets(name, split)
    rows: list[dict[str, Any]] = []
    for config in hub.configs:
        features = _features(hub, config)
        positional, keywords = hub.load_args(config, split)
        if hub.files and features is not None:
            keywords["features"] = features
        try:
            table = datasets.load_dataset(*positional, **keywords)
        except Exception as exc:  # offline, missing from the cache, renamed, gated: one line each
            raise _unreachable(name, hub, split, config, exc) from None
        if features is not None and hasattr(table, "cast_column"):
            table = conform(table, features, f"{name}: {hub.id}{f' ({config})' if config else ''} split {split}")
        rows += table.to_list()
    return rows


def _from_files(name: str, hub: Hub, files: list[Path]) -> list[dict[str, Any]]:
    from .catalogue.schema import load_files

    _datasets(name, None)
    where = f"{name}: {', '.join(map(str, files))}" if len(files) < 3 else f"{name}: {files[0].parent}"
    return load_files(files, _features(hub, hub.configs[0]), where)


def load_rows(name: str, hub: Hub, split: str, path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """All rows of ``name``'s hub split ``split``, as plain dicts in the dataset's own schema."""
    if path is not None:
        files = local_files(name, split, path)
        if not files:
            raise ConfigError(f"{name}: no {split}.jsonl, {split}.parquet or {split}/ under {path} "
                              f"(nor under {Path(path) / name})")
        return _from_files(name, hub, files)
    data_dir = os.environ.get(DATA_DIR_ENV)
    if data_dir and (Path(data_dir) / name).is_dir():
        files = local_files(name, split, Path(data_dir) / name)
        if not files:
            raise ConfigError(f"{name}: {Path(data_dir) / name} has no {split}.jsonl, "
                              f"{split}.parquet or {split}/ folder")
        return _from_files(name, hub, files)
    return _from_hub(name, hub, split)
