"""Numeric precision of a run: what the weights are stored in, what the engine generates in,
and what the update's forward pass computes in.

* ``fp32``: everything float32 (the CPU default: exact, and what the tests compare against).
* ``bf16-mixed``: float32 weights, gradients and optimizer state; the engine generates in
  bfloat16 and the update's forward runs under bfloat16 autocast (the CUDA default; on CPUs
  with AMX it is faster too). Logprobs and the loss stay float32: the chunked log-softmax
  upcasts the logits.
* ``bf16``: the weights themselves in bfloat16, optimizer state included: half the memory of
  the weights, at the cost of updates that small learning rates can round away.
"""

from __future__ import annotations

import contextlib
from typing import Any, Literal

Precision = Literal["fp32", "bf16-mixed", "bf16"]

__all__ = ["Precision", "autocast", "engine_dtype", "resolve", "weights_dtype"]


def resolve(precision: Precision | None, device: str) -> Precision:
    """The precision to run: as set, else ``bf16-mixed`` on CUDA and ``fp32`` elsewhere."""
    if precision is not None:
        return precision
    return "bf16-mixed" if device.startswith("cuda") else "fp32"


def weights_dtype(precision: Precision | None) -> Any:
    import torch

    return torch.bfloat16 if precision == "bf16" else torch.float32


def engine_dtype(precision: Precision | None) -> str:
    """The engine's ``dtype``: the checkpoint's own for fp32 runs, else bfloat16."""
    return "bfloat16" if precision in ("bf16-mixed", "bf16") else "auto"


def autocast(precision: Precision | None, device_type: str) -> contextlib.AbstractContextManager[Any]:
    """The context the update's forward passes run in."""
    import torch

    return torch.autocast(device_type, dtype=torch.bfloat16, enabled=precision == "bf16-mixed")
