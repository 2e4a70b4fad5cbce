"""The user's default model: where agents and ``tracerl eval`` send requests unless told
otherwise. Stored as JSON in ``$TRACERL_HOME/config.json`` (``~/.tracerl`` by default)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError
from .store import default_store_path


class ModelProfile(BaseModel):
    """A model endpoint: the bundled tiny model behind our gateway, or any OpenAI-compatible API."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["tracerl", "openai", "litellm"] = Field(
        "tracerl", description="tracerl: our gateway; openai: any OpenAI-compatible URL; litellm: a LiteLLM model string"
    )
    base_url: str = Field("http://127.0.0.1:8000/v1", description="OpenAI-compatible base URL")
    model: str = Field("tracerl-tiny", description="model name sent in requests")
    api_key_env: str | None = Field(
        None, description="name of the environment variable holding the key (keys are never written to disk)"
    )

    def api_key(self) -> str:
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if not value:
                raise ConfigError(f"the model profile reads its key from ${self.api_key_env}, which is not set")
            return value
        return "tracerl"


def config_path() -> Path:
    return default_store_path().parent / "config.json"


def load_profile(path: Path | None = None) -> ModelProfile:
    """The saved profile, or the defaults when none was saved."""
    path = path or config_path()
    if not path.exists():
        return ModelProfile()
    try:
        return ModelProfile.model_validate(json.loads(path.read_text())["model"])
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        raise ConfigError(f"{path} is not a valid tracerl config ({exc}); fix it or run `tracerl model default`") from exc


def save_profile(profile: ModelProfile, path: Path | None = None) -> Path:
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"model": profile.model_dump()}, indent=2) + "\n")
    tmp.replace(path)  # atomic: a crash never leaves half a config
    return path
