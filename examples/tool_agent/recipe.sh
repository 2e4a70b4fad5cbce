#!/usr/bin/env bash
# The tool-agent recipe end to end (docs/real-model.md), from the repository root:
#   bash examples/tool_agent/recipe.sh            # N_TRACES=320 N_EVAL=200 by default
#   R=runs/tool-agent-check N_TRACES=8 N_EVAL=8 DISTIL_STEPS=2 RL_STEPS=2 bash examples/tool_agent/recipe.sh  # its path, small
#   TEACHER_RL=1 bash examples/tool_agent/recipe.sh  # then LoRA RL on the teacher too (rl-teacher.yaml)
#   SKIP="teacher-held-out student-before" bash examples/tool_agent/recipe.sh  # leave out phases by name
# Phase 1 runs the teacher (Qwen2.5-Coder-0.5B) through the app on training problems and
# exports its traces; phase 2 fine-tunes SmolLM2-135M on the rewarded ones; phase 3 trains it
# by GRPO through the same app. Every accuracy is greedy, through the app, on the same held-out
# problems, by its own `tracerl eval` (the training runs evaluate nothing: each held-out figure
# is measured once). Each phase's wall time goes to runs/tool-agent/times.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
R=${R:-runs/tool-agent}
N_TRACES=${N_TRACES:-320}
N_EVAL=${N_EVAL:-200}
APP=(--agent examples/tool_agent/agent.py:solve --reward examples/tool_agent/reward.py:grade)
DATA=(--data examples/tool_agent/train.jsonl --eval-data examples/tool_agent/test.jsonl)
mkdir -p "$R"
phase() {
  local name=$1; shift
  if [[ " ${SKIP:-} " == *" $name "* ]]; then echo "$name skipped (SKIP)"; return; fi
  local t0=$SECONDS; "$@"; echo "$name $((SECONDS - t0)) s" | tee -a "$R/times.txt"
}
# a 0.5B model on 2 cores: 32 episodes in flight share the engine, so one can wait minutes for it
WAIT=(--timeout 3600)
held_out() { tracerl eval --model "$1" --data examples/tool_agent/test.jsonl "${APP[@]}" --max-examples "$N_EVAL" "${WAIT[@]}" --output "$R/$2"; }

phase setup tracerl model setup qwen2.5-coder-0.5b
phase setup-student tracerl model setup smollm2-135m
phase teacher-held-out held_out qwen2.5-coder-0.5b eval-teacher
phase student-before held_out smollm2-135m eval-student-before
# the teacher on training problems: these episodes are marked train (not eval), to be trained on
phase teacher-traces tracerl eval --model qwen2.5-coder-0.5b --data examples/tool_agent/train.jsonl --split train \
  "${APP[@]}" --max-examples "$N_TRACES" "${WAIT[@]}" --output "$R/teacher-traces"
tracerl traces export "$R/teacher.jsonl" --db "$R/teacher-traces/traces.db"
phase distil tracerl train --model smollm2-135m "${DATA[@]}" "${APP[@]}" --from-traces "$R/teacher.jsonl" \
  --config examples/tool_agent/distil.yaml ${DISTIL_STEPS:+--steps $DISTIL_STEPS} --output "$R/student-distil" --quiet
DISTILLED=$(ls -d "$R"/student-distil/checkpoints/step-* | tail -n 1)
phase student-distilled held_out "$DISTILLED" eval-student-distil
phase rl tracerl train --model "$DISTILLED" "${DATA[@]}" "${APP[@]}" \
  --config examples/tool_agent/rl.yaml ${RL_STEPS:+--steps $RL_STEPS} --output "$R/student-rl" --quiet
STUDENT=$(ls -d "$R"/student-rl/checkpoints/step-* | tail -n 1)
phase student-after held_out "$STUDENT" eval-student-rl
phase student-agents-sdk tracerl eval --model "$STUDENT" --data examples/tool_agent/test.jsonl \
  --agent examples/tool_agent/agent_openai_agents.py:solve --reward examples/tool_agent/reward.py:grade \
  --max-examples "$N_EVAL" "${WAIT[@]}" --output "$R/eval-student-rl-agents-sdk"
# Apart from the recipe (TEACHER_RL=1): RL directly on the 0.5B teacher with LoRA, a short run
if [[ ${TEACHER_RL:-0} == 1 ]]; then
  phase teacher-rl tracerl train --model qwen2.5-coder-0.5b "${DATA[@]}" "${APP[@]}" \
    --config examples/tool_agent/rl-teacher.yaml --output "$R/teacher-rl" --quiet
fi
