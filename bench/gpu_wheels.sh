#!/usr/bin/env bash
# Wheels for the GPU machine (Python 3.12, x86-64): what tracerl and bench/gpu_step.py import
# that its image lacks (its torch, transformers, accelerate, tokenizers, httpx, pyarrow, pandas
# and numpy are used as they are). Into .whl/ (git-ignored); ~8 MiB, well under a call's 64 MiB.
#   bash bench/gpu_wheels.sh
# then, on the machine, before anything else (device run, carry [".whl"]):
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
  fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 orjson==3.13.0 \
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2 \
  importlib-metadata==8.9.0 trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \
  pytest-asyncio==1.5.0
du -sh .whl
