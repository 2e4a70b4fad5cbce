"""Checkpoints a SIGKILL cannot corrupt: write a temporary folder, then rename it into place.

    output/checkpoints/step-000012/
        model.safetensors, config.json, tokenizer files   (from_pretrained loads the folder)
        trainer_state.pt   optimizer, scheduler, RNG states, step, data position, version

A rename is atomic on POSIX, so a reader sees either the whole folder or none of it; the
newest complete ``step-*`` folder is the one resumed from. Old ones are pruned after.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from tracerl.core.errors import ConfigError

_NAME = re.compile(r"^step-(\d{6,})$")
STATE_FILE = "trainer_state.pt"


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(
    root: Path, step: int, model: Any, tokenizer: Any, optimizer: Any, scheduler: Any,
    extra: dict[str, Any], keep: int = 2, *, state_dict: dict[str, Any] | None = None,
    optimizer_state: dict[str, Any] | None = None,
) -> Path:
    """Write ``root/step-{step}`` atomically and keep the newest ``keep`` checkpoints.
    ``state_dict`` and ``optimizer_state`` replace the model's and optimizer's own (a sharded
    model's, gathered)."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-step-{step:06d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True, state_dict=state_dict)
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict() if optimizer_state is None else optimizer_state,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "rng": rng_state(),
        **extra,
    }
    torch.save(state, tmp / STATE_FILE)
    _fsync_dir(tmp)
    if final.exists():  # a re-run of the same step (after a resume) replaces it
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(root)
    for old in checkpoints(root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def checkpoints(root: Path) -> list[Path]:
    """Complete checkpoints, oldest first (temporary folders of a killed save are ignored)."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if _NAME.match(p.name) and (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)))  # type: ignore[union-attr]


def latest(root: Path) -> Path | None:
    found = checkpoints(root)
    return found[-1] if found else None


def load_state(path: Path) -> dict[str, Any]:
    """The trainer state of checkpoint ``path`` (weights are loaded with from_pretrained)."""
    try:
        return torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - a broken file is a config problem to report
        raise ConfigError(f"checkpoint {path} cannot be read ({exc}); delete it to resume from the one before") from exc


def _fsync_dir(path: Path) -> None:
    """Flush a folder's files and its entries, so a rename is not reordered before the data."""
    for child in path.iterdir() if path.is_dir() else ():
        if child.is_file() and not child.name.startswith(".tmp"):
            with open(child, "rb") as fh:
                os.fsync(fh.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
