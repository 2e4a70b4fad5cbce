#!/usr/bin/env bash
# Every GPU check in one go, for a lent GPU machine (docs/gpu.md): under 5 minutes on one H200,
# each figure written under $OUT as soon as it exists, so a run cut short still returns them.
#   bash bench/gpu_wheels.sh                     # here, once: the wheels the GPU image lacks, in .whl/
#   device run, carry [".whl"]: bash bench/gpu_check.sh
#   SHAPE=check OUT=/tmp/gc bash bench/gpu_check.sh   # the same path on a CPU, on a tiny model
# 1. tests/gpu, every test under a timeout (the vLLM ones report "not importable here": vLLM's
#    wheel pins torch 2.14 and cannot be carried);
# 2. five steps of `tracerl train` with the CUDA TorchEngine on a random-weight Qwen2.5-0.5B-shaped
#    model (nothing can be downloaded there), bf16-mixed;
# 3. bench/gpu_step.py: rollout and update tokens/s and MFU, tracerl against TRL, and the peak
#    memory of a 1.5B update next to its engine.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu-check}
SHAPE=${SHAPE:-0.5b}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TRACERL_HOME=${TRACERL_HOME:-/tmp/tracerl-home}
PY=${PY:-python3}
note() { echo "$(date +%T) $*" | tee -a "$OUT/progress.txt"; }

note "device"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || echo "no nvidia-smi"
  $PY -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__)"
} > "$OUT/device.txt" 2>&1

note "1. tests/gpu"
timeout 150 $PY -m pytest -q -rs -p no:cacheprovider tests/gpu --timeout 120 > "$OUT/tests-gpu.txt" 2>&1
note "   exit $? ($(tail -n 1 "$OUT/tests-gpu.txt"))"

note "2. tracerl train, 5 steps, random-weight $SHAPE Qwen2"
MODEL=$($PY bench/gpu_step.py --make-model "$SHAPE" --out runs/gpu-step | tail -n 1)
rm -rf runs/gpu-train
# the model's words are random, so every reward is 0: the flat groups are kept, the update still runs
timeout 120 $PY -m tracerl train arithmetic --model "$MODEL" --steps 5 --batch-size 8 --group-size 8 \
  --eval-size 0 --set drop_zero_variance=false --set rollout.max_tokens=64 --set save_every=0 \
  --output runs/gpu-train --quiet > "$OUT/train.txt" 2>&1
note "   exit $?"
cp runs/gpu-train/metrics.jsonl "$OUT/train-metrics.jsonl" 2>/dev/null

note "3. bench/gpu_step.py"
if [ "$SHAPE" = check ]; then STEP=(--check --modes tracerl trl); else STEP=(--modes tracerl trl memory-1.5b); fi
timeout 200 $PY bench/gpu_step.py "${STEP[@]}" --timeout 90 --out runs/gpu-step > "$OUT/gpu-step.txt" 2>&1
note "   exit $?"
cp runs/gpu-step/report.md runs/gpu-step/results.json "$OUT/" 2>/dev/null
note "done"
