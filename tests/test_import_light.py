"""`import tracerl` and its core names pull in no framework, torch or web server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "import_time.py"


def _check(*extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--check", *extra], capture_output=True, text=True,
                          timeout=120, check=False)


def test_import_tracerl_and_core_names_stay_light() -> None:
    result = _check()
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ok: none of torch, transformers")


def test_the_check_notices_a_heavy_import() -> None:
    result = _check("--touch", "import fastapi")
    assert result.returncode == 1
    assert "+ import fastapi: imported fastapi" in result.stdout
