"""LoRA through peft: train low-rank adapters, serve merged weights, save adapters only.

The engine always receives full merged weights (W + scale * B @ A, computed without touching
the trained modules, so no merge/unmerge rounding creeps into the base weights); checkpoints
hold the adapter (``adapter_model.safetensors`` + ``adapter_config.json``), loadable with
``peft.PeftModel.from_pretrained(base_model, checkpoint)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import LoraSettings


def _peft() -> Any:
    try:
        import peft
    except ImportError as exc:
        from tracerl.core.errors import MissingDependencyError

        raise MissingDependencyError("peft", "lora", "LoRA training") from exc
    return peft


def apply(model: Any, settings: LoraSettings) -> Any:
    """Wrap ``model`` with fresh trainable adapters."""
    peft = _peft()
    config = peft.LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                             target_modules=settings.target_modules, task_type="CAUSAL_LM")
    return peft.get_peft_model(model, config)


def load(model: Any, path: Path) -> Any:
    """``model`` with the trainable adapters saved in checkpoint ``path``."""
    return _peft().PeftModel.from_pretrained(model, str(path), is_trainable=True)


def is_adapter_checkpoint(path: Path) -> bool:
    return (path / "adapter_config.json").is_file()


def merged_state_dict(model: Any) -> dict[str, Any]:
    """The plain model's state dict with every adapter folded into its base weight."""
    peft = _peft()
    if not isinstance(model, peft.PeftModel):
        return model.state_dict()
    base = model.get_base_model()
    deltas = {}
    for name, module in base.named_modules():
        if isinstance(module, peft.tuners.lora.LoraLayer) and module.active_adapters:
            delta = sum(module.get_delta_weight(a) for a in module.active_adapters if a in module.lora_A)
            deltas[f"{name}.weight"] = delta
    out = {}
    for key, value in base.state_dict().items():
        if ".lora_" in key:
            continue
        plain = key.replace(".base_layer.", ".")
        out[plain] = (value + deltas[plain]).detach() if plain in deltas else value
    return out
