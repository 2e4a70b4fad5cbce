"""Weights as one safetensors file: what crosses to an engine this process does not hold.

safetensors refuses tensors that share memory (a model's tied input and output embeddings),
so each storage is written once and the other names are kept in the file's metadata
(``tracerl.aliases``): :func:`load` gives back every name the model's ``state_dict`` has, which
is what ``load_state_dict(strict=True)`` wants. Used for a vLLM server's ``reload_weights`` (which
ties weights itself and ignores the metadata) and for a replica gateway's ``/admin/weights``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["ALIASES", "load", "save"]

ALIASES = "tracerl.aliases"


def save(state_dict: dict[str, Any], path: str | os.PathLike[str], dtype: str = "auto") -> None:
    """Write ``state_dict`` to ``path`` (atomically: a reader never sees half a file), floating
    tensors cast to ``dtype`` unless ``"auto"``."""
    import torch
    from safetensors.torch import save_file

    cast_to = None if dtype == "auto" else getattr(torch, dtype)
    kept: dict[int, str] = {}
    unique: dict[str, Any] = {}
    aliases: dict[str, str] = {}
    for name, tensor in state_dict.items():
        ptr = tensor.data_ptr()
        if ptr in kept:
            aliases[name] = kept[ptr]
            continue
        kept[ptr] = name
        t = tensor.detach()
        unique[name] = (t.to(cast_to) if cast_to is not None and t.is_floating_point() else t).contiguous().cpu()
    tmp = Path(f"{path}.tmp")
    save_file(unique, str(tmp), metadata={ALIASES: json.dumps(aliases)})
    os.replace(tmp, path)


def load(path: str | os.PathLike[str], device: str = "cpu") -> dict[str, Any]:
    """The state dict :func:`save` wrote, every alias back under its own name."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt", device=device) as f:
        aliases = json.loads((f.metadata() or {}).get(ALIASES, "{}"))
        state = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 - safe_open has no __iter__
    for name, target in aliases.items():
        state[name] = state[target]
    return state
