"""What a new user's first mistakes print: click's usage on a usage error (exit 2), one line on a
bad value, a missing model folder, a busy port or a broken config file (exit 1), never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tracerl.cli.main import main

ROOT = Path(__file__).parent.parent


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text, text


@pytest.mark.parametrize(("argv", "help_of", "error"), [
    (["eval", "arithmetic", "--bogus", "1"], "tracerl eval", "Error: No such option: --bogus"),
    (["traces", "lst"], "tracerl traces", "Error: No such command 'lst'. Did you mean 'list'?"),
    (["traces", "show"], "tracerl traces show", "Error: Missing argument"),
])
def test_usage_errors_print_clicks_usage_and_exit_2(argv, help_of, error, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0].startswith(f"Usage: {help_of} ")
    assert lines[1] == f"Try '{help_of} --help' for help."
    assert lines[-1].startswith(error), err
    _no_traceback(err)


def test_a_bad_option_value_is_one_line_naming_the_option_and_the_rule(capsys):
    assert main(["eval", "arithmetic", "--n", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "'--n'" in err and "greater than or equal to 1" in err and "tracerl eval --help" in err


def test_the_installed_entry_point_exits_2_on_a_usage_error():
    exe = Path(sys.executable).parent / "tracerl"
    if not exe.is_file():
        pytest.skip("no tracerl console script next to this interpreter")
    proc = subprocess.run([str(exe), "traces", "lst"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "No such command 'lst'. Did you mean 'list'?" in proc.stderr
    _no_traceback(proc.stderr)


@pytest.mark.parametrize("argv", [
    ["eval", "arithmetic", "--model", "{missing}", "--output", "{tmp}/eval"],
    ["train", "arithmetic", "--model", "{missing}", "--output", "{tmp}/run", "--eval-size", "0"],
    ["gateway", "serve", "--model", "{missing}", "--port", "1"],
])
def test_a_missing_model_folder_is_one_line(argv, tmp_path, capsys):
    missing = str(tmp_path / "no" / "such" / "dir")
    argv = [a.format(missing=missing, tmp=tmp_path) for a in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("tracerl: error: model folder") and missing in err and "does not exist" in err
    assert "Hugging Face model folder" in err and "hub id" in err
    assert not (tmp_path / "eval").exists() and not (tmp_path / "run").exists()  # nothing was written


def test_an_existing_folder_that_is_no_model_is_one_line(tmp_path, capsys):
    assert main(["eval", "arithmetic", "--model", str(tmp_path), "--output", str(tmp_path / "eval")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds no config.json" in err, err


def test_a_hub_id_offline_is_one_line(tmp_path):
    # HF_HUB_OFFLINE is read when huggingface_hub is imported: set it for a fresh process
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "tracerl.cli.main", "eval", "arithmetic", "--model",
                           "no-such-org/no-such-model", "--output", str(tmp_path / "eval")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert "no-such-org/no-such-model" in err and "HF_HUB_OFFLINE" in err and "local model folder" in err


def test_gateway_serve_on_a_busy_port_fails_before_serving(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["gateway", "serve", "--port", str(port)]) == 1
    out, err = capsys.readouterr()
    assert "serving" not in out
    assert err.strip() == err.strip().splitlines()[0], err
    assert f"127.0.0.1:{port}" in err and "in use" in err and "--port" in err


def test_a_broken_yaml_config_names_the_line_and_column(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: 3\nloss:\n  kl_beta: 0.1\n   eps_high: 2\n")
    assert main(["train", "arithmetic", "--config", str(bad), "--dry-run"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"config file {bad}, line 4, column 12: mapping values are not allowed here" in err


def test_a_broken_json_config_names_the_line_and_column(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"steps": 3,\n "seed": }\n')
    assert main(["train", "arithmetic", "--config", str(bad), "--dry-run"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"config file {bad}, line 2, column 10: Expecting value" in err, err


@pytest.mark.parametrize("argv", [
    ["gateway", "serve", "--db", "mysql://user:secret@host:5432/db", "--port", "1"],
    ["traces", "list", "--db", "mysql://user:secret@host:5432/db"],
    ["train", "arithmetic", "--store", "mysql://user:secret@host:5432/db", "--steps", "1"],
    ["eval", "arithmetic", "--store", "mysql://user:secret@host:5432/db"],
])
def test_a_store_url_of_an_unknown_kind_is_one_line_and_makes_no_folder(argv, tmp_path, monkeypatch, capsys):
    """Taken as a path, a URL would quietly make a folder named ``mysql:`` holding a new, empty
    store; the password is not printed."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "'mysql' URL" in err and "postgresql://" in err and "secret" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["gateway", "serve", "--store", "postgresql://u:secret@127.0.0.1:1/db", "--port", "1"],
    ["traces", "list", "--store", "postgresql://u:secret@127.0.0.1:1/db"],
])
def test_a_postgresql_store_that_is_down_is_one_line(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "cannot open span store postgresql://u:***@127.0.0.1:1/db" in err and "secret" not in err
