"""Build tracerl's bundled tiny policy: tracerl/models/tiny/ (a Hugging Face model directory).

    .venv/bin/python scripts/build_tiny_model.py [--out DIR] [--drill-steps N] [--copy-steps N] [--chat-steps N]

What it makes, deterministically (fixed seeds, deterministic torch kernels, 1 thread):

* a byte-level BPE tokenizer trained on the synthetic corpus (round-trips any text),
  with ChatML special tokens and a Hermes-style tool-calling chat template;
* a ~1M-parameter Llama model, supervised on tracerl.tasks.synthetic dialogues in exactly
  the format agents send (SYSTEM_PROMPT, the question, the calculator tool where offered),
  with loss on assistant tokens only. Deliberately partial, in two ways RL can then fix:
  - single-digit arithmetic: the model knows about half the sums (in any format) but follows
    the system prompt's answer format only a quarter of the time (ANSWER_FORMATS);
  - two-digit + and - (the ``calculator`` task, make demo's): the model gets almost none right
    from memory and rarely calls the offered calculator (TOOL_CALL_RATE_TWO_DIGIT), but when
    it does it copies the expression and the result well (forced_tool_accuracy, ~0.9 greedy):
    calling the tool is the skill RL has to find, and it transfers to unseen problems;
* training_report.json: held-out test accuracy per task, greedy and sampled (T=1), the
  tool-call rate, and accuracy when the reply is forced to call the tool or to answer.

Three phases under one learning-rate schedule: a single-digit drill, then mostly two-digit
tool calls (copying is learned far faster when nothing else competes), then every kind.
3,300 steps of 1,024 tokens on one torch thread: measured 11.2 minutes on 2 CPU cores with a
training run beside it for half of it. Two torch threads made it 10-20x slower on shared cores.
