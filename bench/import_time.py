"""How long ``import tracerl`` takes, and that it pulls in no heavy framework.

Each measurement runs in a fresh interpreter (cold for Python, warm for the OS file cache)
and the median of ``--runs`` is reported, next to the bare interpreter start for scale.
After ``import tracerl`` and after touching the core names a user reaches first, none of
:data:`FORBIDDEN` may be in ``sys.modules`` (ARCHITECTURE: core never imports a framework,
torch or FastAPI); the script exits 1 when one is.

    python bench/import_time.py            # timing table + check
    python bench/import_time.py --check    # the check only (tests/test_import_light.py)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

FORBIDDEN = (
    "torch", "transformers", "vllm", "fastapi", "uvicorn", "litellm",
    "langchain", "langchain_core", "langchain_openai", "langgraph", "agents",
)

# (label, code run after `import tracerl`)
CASES = (
    ("import tracerl", ""),
    ("+ tracerl.Episode", "tracerl.Episode"),
    ("+ tracerl.SpanStore", "tracerl.SpanStore"),
    ("+ tracerl.decode_otlp", "tracerl.decode_otlp"),
    ("+ tracerl.episode_from_spans", "tracerl.episode_from_spans"),
)

_PROBE = """
import json, sys, time
t0 = time.perf_counter()
import tracerl
{touch}
dt = time.perf_counter() - t0
forbidden = {forbidden!r}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in forbidden)
print(json.dumps({{"seconds": dt, "forbidden": loaded, "modules": len(sys.modules)}}))
"""


def probe(touch: str) -> dict[str, Any]:
    """Run one fresh interpreter: import tracerl, run ``touch``, report times and modules."""
    code = _PROBE.format(touch=touch, forbidden=FORBIDDEN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"probe {touch or 'import tracerl'!r} failed:\n{out.stderr}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall"] = wall
    return result


def bare_interpreter(runs: int) -> float:
    """Median wall time of ``python -c pass``: the floor every CLI call pays anyway."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def check(extra: str | None = None) -> list[str]:
    """One line per case that imported a forbidden module (empty when all is well)."""
    problems = []
    for label, touch in [*CASES, *([("+ " + extra, extra)] if extra else [])]:
        loaded = probe(touch)["forbidden"]
        if loaded:
            problems.append(f"{label}: imported {', '.join(loaded)}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per case (median)")
    parser.add_argument("--check", action="store_true", help="only check for forbidden imports")
    parser.add_argument("--touch", help="with --check: also check after running this code")
    args = parser.parse_args()
    if args.check:
        problems = check(args.touch)
        print("\n".join(problems) or f"ok: none of {', '.join(FORBIDDEN)} imported")
        return 1 if problems else 0

    print(f"python {sys.version.split()[0]}, {args.runs} fresh interpreters per case, medians\n")
    print(f"{'case':32} {'import ms':>10} {'process ms':>11} {'modules':>8}  forbidden")
    print(f"{'python -c pass':32} {'':>10} {bare_interpreter(args.runs) * 1000:11.1f}")
    problems = []
    for label, touch in CASES:
        results = [probe(touch) for _ in range(args.runs)]
        ms = statistics.median(r["seconds"] for r in results) * 1000
        wall = statistics.median(r["wall"] for r in results) * 1000
        loaded = sorted({m for r in results for m in r["forbidden"]})
        print(f"{label:32} {ms:10.1f} {wall:11.1f} {results[0]['modules']:>8}  {', '.join(loaded) or '-'}")
        if loaded:
            problems.append(label)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
