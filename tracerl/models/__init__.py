"""Models bundled with tracerl.

``tiny/`` is the embedded default policy: a ~1M-parameter Llama model with a byte-level BPE
tokenizer and a ChatML tool-calling chat template, supervised to partial accuracy on
:mod:`tracerl.tasks.synthetic` so that RL on a CPU has something to improve: the answer
format on single-digit sums, and calling the calculator tool on two-digit ones (``calculator``). Load it like any
hub model::

    AutoModelForCausalLM.from_pretrained(tiny_model_path())
    AutoTokenizer.from_pretrained(tiny_model_path())

It is rebuilt, deterministically, by ``scripts/build_tiny_model.py``; its held-out
accuracies are in ``tiny/training_report.json``.
"""

from __future__ import annotations

from pathlib import Path

from tracerl.core.errors import ConfigError

__all__ = ["tiny_model_path"]


def tiny_model_path() -> Path:
    """The directory of the bundled tiny model (config, weights, tokenizer, chat template)."""
    path = Path(__file__).resolve().parent / "tiny"
    if not (path / "model.safetensors").is_file():
        raise ConfigError(
            f"The bundled tiny model is missing from {path}: this tracerl install was built "
            "without its package data. Rebuild it with `python scripts/build_tiny_model.py` "
            "from a source checkout, or reinstall tracerl."
        )
    return path
