"""What each catalogue dataset declares about itself: its features and split sizes, as its card says.

A benchmark's loader reads columns by name, so the columns it reads are a contract with the
dataset's authors. ``schemas/<org>__<name>.yaml`` holds that contract, copied from the
dataset's card (the ``dataset_info`` block of its README's YAML header, or its
``dataset_infos.json``/loading script where it has no card block), with the dataset id and
the revision it was read at::

    dataset: openai/gsm8k
    revision: e53f048856ff4f594e959d75785d2c2d37b678ee
    card: https://huggingface.co/datasets/openai/gsm8k/blob/<revision>/README.md
    source: card                 # card | dataset_infos.json | loading script | parquet branch
    read: 2026-12-03
    dataset_info: [...]          # verbatim: one config (a mapping) or a list of configs
    not_null: [task_id, entry_point]   # optional: columns no row may leave null or out

Rows are checked against it wherever they come from (:func:`conform`): a local copy, the
hub, or a test's fixture. A column the loader needs that is missing, or a value of another
type, is one :class:`~tracerl.core.errors.ConfigError` line naming the file and the column,
rather than a ``KeyError`` deep in a prompt builder. A card's features say nothing of nulls, and
``datasets`` fills a key a row leaves out with null, so the columns a loader cannot do without
are listed under ``not_null`` (real data keeps nulls elsewhere: most of GPQA's revision
columns): a null there, or a row without the key, is one line naming the file, the column and
the row.

``python -m tracerl.tasks.catalogue.schema DATASET_ID FILE [FILE ...] [--config NAME]`` checks
files by hand.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datasets import Features

from tracerl.core.errors import ConfigError

SCHEMAS = Path(__file__).parent / "schemas"


def schema_path(dataset: str) -> Path:
    """Where ``dataset``'s declaration lives (``org/name`` -> ``schemas/org__name.yaml``)."""
    return SCHEMAS / (dataset.replace("/", "__") + ".yaml")


class DeclaredFeatures(Features):
    """A config's declared features, and the columns no row may leave null (``not_null``)."""

    not_null: tuple[str, ...] = ()


@dataclass(frozen=True)
class Declared:
    """One dataset's declaration: features and split sizes per config, and where they were read."""

    dataset: str
    revision: str
    card: str
    source: str
    info: dict[str, Any]  # config name -> datasets.DatasetInfo
    not_null: tuple[str, ...] = ()  # columns no row may leave null (every config's that has them)

    def configs(self) -> list[str]:
        return list(self.info)

    def features(self, config: str | None = None) -> Any:
        """The declared ``datasets.Features`` of ``config`` (the only one when None), as
        :class:`DeclaredFeatures` naming its ``not_null`` columns."""
        features = DeclaredFeatures(self._info(config).features)
        features.not_null = tuple(name for name in self.not_null if name in features)
        return features

    def split_sizes(self, configs: tuple[str | None, ...] = (None,)) -> dict[str, int]:
        """Declared rows per split, summed over ``configs``."""
        sizes: dict[str, int] = {}
        for config in configs:
            for name, split in (self._info(config).splits or {}).items():
                sizes[name] = sizes.get(name, 0) + int(split.num_examples or 0)
        return sizes

    def _info(self, config: str | None) -> Any:
        if config is None:
            if len(self.info) != 1 and "default" not in self.info:
                raise ConfigError(f"{self.dataset} declares configs {', '.join(self.info)}; name one")
            return self.info["default"] if "default" in self.info else next(iter(self.info.values()))
        if config not in self.info:
            if len(self.info) == 1:  # a card that declares one config for all (e.g. parquet branches)
                return next(iter(self.info.values()))
            raise ConfigError(f"{self.dataset} declares no config {config!r} (it has: {', '.join(self.info)})")
        return self.info[config]


@functools.cache
def declared(dataset: str) -> Declared:
    """The declaration of hub dataset ``dataset`` shipped with tracerl."""
    import yaml
    from datasets.info import DatasetInfosDict

    path = schema_path(dataset)
    if not path.is_file():
        raise ConfigError(f"no declared schema for {dataset} (expected {path})")
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if raw.get("dataset") != dataset:
        raise ConfigError(f"{path} declares {raw.get('dataset')!r}, not {dataset!r}")
    block = raw["dataset_info"]
    if isinstance(block, dict) and "config_name" not in block:
        block = {**block, "config_name": "default"}
    infos = DatasetInfosDict.from_dataset_card_data({"dataset_info": block})
    not_null = raw.get("not_null") or []
    if not isinstance(not_null, list) or not all(isinstance(name, str) for name in not_null):
        raise ConfigError(f"{path}: not_null must be a list of column names, not {not_null!r}")
    return Declared(dataset, str(raw["revision"]), str(raw.get("card", "")), str(raw.get("source", "card")),
                    dict(infos), tuple(not_null))


def refuse_nulls(table: Any, features: Any, where: str) -> None:
    """One ConfigError line naming ``where``, the column and the row when a ``not_null`` column
    of ``features`` is null in some row of ``table`` (a ``datasets.Dataset``)."""
    import pyarrow.compute as pc

    for name in getattr(features, "not_null", ()):
        if name not in table.column_names:
            continue
        column = table.data.column(name)
        if column.null_count:
            row = pc.index(pc.is_null(column), True).as_py()
            raise ConfigError(f"{where}: column {name!r} is null or missing in row {row + 1} (of "
                              f"{len(table):,}); the loader needs it in every row: fill it or drop the row")


def _describe(feature: Any) -> str:
    return " ".join(repr(feature).split())[:80]


def conform(table: Any, features: Any, where: str) -> Any:
    """``table`` (a ``datasets.Dataset``) cast to the declared ``features``: every declared column
    present (extra ones are dropped), each castable; else one ConfigError line naming ``where``."""
    have = set(table.column_names)
    missing = [name for name in features if name not in have]
    if missing:
        raise ConfigError(f"{where}: no column {', '.join(map(repr, missing))} (declared: "
                          f"{', '.join(features)}; it has: {', '.join(table.column_names)})")
    extra = [name for name in table.column_names if name not in features]
    if extra:
        table = table.remove_columns(extra)
    for name, feature in features.items():
        if table.features[name] == feature:
            continue
        try:
            table = table.cast_column(name, feature)
        except Exception as exc:  # pyarrow's and datasets' cast errors have no common base
            reason = " ".join(str(exc).split())[:160]
            raise ConfigError(f"{where}: column {name!r} is {_describe(table.features[name])}, declared "
                              f"{_describe(feature)} ({type(exc).__name__}: {reason})") from None
    refuse_nulls(table, features, where)
    return table


def _columns(path: Path) -> list[str] | None:
    """The columns of a data file, read cheaply (a JSON-lines file's first row, a Parquet schema)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    if path.suffix == ".jsonl":
        import json

        with open(path, encoding="utf-8") as f:
            first = f.readline()
        row = json.loads(first) if first.strip() else None
        return list(row) if isinstance(row, dict) else None
    return None


def load_files(files: list[Path], features: Any | None, where: str) -> list[dict[str, Any]]:
    """Rows of local JSON-lines/JSON/Parquet files or a ``save_to_disk`` folder, read by
    ``datasets`` and conformed to ``features`` when given.

    Files are read with ``features=`` when there are some: JSON whose lists hold objects of
    different keys (IFEval's ``kwargs``, BFCL's parameters) would otherwise be inferred as
    something else. A declared column missing from a file is refused first: given features,
    the json builder would fill it with nulls."""
    import datasets

    if len(files) == 1 and files[0].is_dir():
        table = datasets.load_from_disk(str(files[0]))
        if isinstance(table, datasets.DatasetDict):
            raise ConfigError(f"{where}: {files[0]} holds several splits; name the split's own folder")
        return (conform(table, features, where) if features is not None else table).to_list()
    builder = "parquet" if all(f.suffix == ".parquet" for f in files) else "json"
    if features is not None:
        for path in files:
            have = _columns(path)
            missing = [name for name in features if have is not None and name not in have]
            if missing:
                raise ConfigError(f"{where}: {path.name} has no column {', '.join(map(repr, missing))} "
                                  f"(declared: {', '.join(features)}; it has: {', '.join(have or [])})")
    data_files = [str(f) for f in files]
    try:
        table = datasets.load_dataset(builder, data_files=data_files, split="train", features=features)
    except Exception as exc:
        if features is not None:  # say which column does not fit, where a plain read shows it
            with contextlib.suppress(ConfigError, Exception):
                conform(datasets.load_dataset(builder, data_files=data_files, split="train"), features, where)
        reason = " ".join(str(exc.__cause__ or exc).split())[:200]
        raise ConfigError(f"{where}: cannot read {', '.join(map(str, files))}: {reason}") from None
    if features is not None:
        refuse_nulls(table, features, where)
    return table.to_list()


def main(argv: list[str]) -> int:
    """Check fixture or local files against a dataset's declaration (exact columns, castable)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tracerl.tasks.catalogue.schema")
    parser.add_argument("dataset")
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--config")
    args = parser.parse_args(argv)
    spec = declared(args.dataset)
    features = spec.features(args.config)
    for path in args.files:
        import datasets

        raw = datasets.load_dataset("json" if path.suffix != ".parquet" else "parquet",
                                    data_files=[str(path)], split="train")
        if set(raw.column_names) != set(features):
            print(f"{path}: columns {sorted(raw.column_names)} != declared {sorted(features)}")
            return 1
        rows = load_files([path], features, str(path))
        print(f"{path}: {len(rows)} rows match {args.dataset}"
              f"{' ' + args.config if args.config else ''} at {spec.revision} ({spec.split_sizes((args.config,))})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
