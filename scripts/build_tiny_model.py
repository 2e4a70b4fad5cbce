"""Build tracerl's bundled tiny policy: tracerl/models/tiny/ (a Hugging Face model directory).

    .venv/bin/python scripts/build_tiny_model.py [--out DIR] [--steps N]

What it makes, deterministically (fixed seeds, deterministic torch kernels, 2 threads):

* a byte-level BPE tokenizer trained on the synthetic corpus (round-trips any text),
  with ChatML special tokens and a Hermes-style tool-calling chat template;
* a ~1M-parameter Llama model, supervised on tracerl.tasks.synthetic dialogues
  (arithmetic, countdown, "Wrong, try again." retries, calculator tool calls), with loss on
  assistant tokens only, and stopped early on purpose: greedy accuracy on held-back
  arithmetic problems of roughly a third, so that RL has headroom;
* training_report.json: held-out test accuracy per task, greedy and sampled (T=1).

About 3-6 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import time
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from tracerl.tasks.synthetic import CALCULATOR_TOOL, FEEDBACK, TASKS, calculator

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tracerl" / "models" / "tiny"
SEED = 1234
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKUP = ["<tool_call>", "</tool_call>", "<tools>", "</tools>"]  # single tokens, not special
TOOLS_HEADER = "# Tools\n<tools>\n"
TOOLS_FOOTER = '</tools>\nTo call a tool, reply <tool_call>{"name": ..., "arguments": {...}}</tool_call>'

# ChatML. Content is never stripped and tool calls are rendered with json.dumps' default
# separators, so a prompt + the model's text + <|im_end|> is a token prefix of the next
# turn's prompt (token-in/token-out). Tool-call arguments given as a JSON string are
# rendered verbatim; given as a mapping, with tojson.
CHAT_TEMPLATE = (
    "{%- macro text(c) -%}{%- if c is string -%}{{- c -}}{%- elif c -%}{%- for p in c -%}"
    "{%- if p.text is defined -%}{{- p.text -}}{%- endif -%}{%- endfor -%}{%- endif -%}{%- endmacro -%}"
    "{%- if tools -%}{{- '<|im_start|>system\\n' -}}"
    "{%- if messages and messages[0].role == 'system' -%}{{- text(messages[0].content) + '\\n\\n' -}}{%- endif -%}"
    "{{- " + json.dumps(TOOLS_HEADER) + " -}}"
    "{%- for tool in tools -%}{{- (tool | tojson) + '\\n' -}}{%- endfor -%}"
    "{{- " + json.dumps(TOOLS_FOOTER) + " + '<|im_end|>\\n' -}}"
    "{%- elif messages and messages[0].role == 'system' -%}"
    "{{- '<|im_start|>system\\n' + text(messages[0].content) + '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- for m in messages -%}{%- if not (loop.first and m.role == 'system') -%}"
    "{{- '<|im_start|>' + m.role + '\\n' + text(m.content) -}}"
    "{%- if m.role == 'assistant' and m.tool_calls -%}{%- for tc in m.tool_calls -%}"
    "{%- set f = tc.function if tc.function is defined else tc -%}"
    "{{- '<tool_call>{\"name\": ' + (f.name | tojson) + ', \"arguments\": ' -}}"
    "{{- (f.arguments if f.arguments is string else (f.arguments | tojson)) + '}</tool_call>' -}}"
    "{%- endfor -%}{%- endif -%}{{- '<|im_end|>\\n' -}}{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

# ------------------------------------------------------------------- synthetic dialogues


def tool_call_text(expression: str) -> str:
    args = json.dumps({"expression": expression})
    return f'<tool_call>{{"name": "calculator", "arguments": {args}}}</tool_call>'


def render(messages: list[dict[str, Any]], tools: list[dict] | None) -> list[tuple[str, bool]]:
    """CHAT_TEMPLATE in Python as (text, trained) segments; trained = assistant text + <|im_end|>.

    Only tool calls written as (content) text are supported: the training data has no others.
    """
    segs: list[tuple[str, bool]] = []
    rest = messages
    if tools or (messages and messages[0]["role"] == "system"):
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
        rest = messages[1:] if system is not None else messages
        if tools:
            body = (system + "\n\n" if system is not None else "") + TOOLS_HEADER
            body += "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tools) + TOOLS_FOOTER
        else:
            body = system
        segs.append((f"<|im_start|>system\n{body}<|im_end|>\n", False))
    for m in rest:
        if m["role"] == "assistant":
            segs.append(("<|im_start|>assistant\n", False))
            segs.append((m["content"] + "<|im_end|>", not m.get("masked", False)))
            segs.append(("\n", False))
        else:
            segs.append((f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n", False))
    return segs


def _near_miss(rng: random.Random, answer: int, avoid: set[int]) -> int:
    while True:
        wrong = answer + rng.choice((-10, -2, -1, 1, 2, 10, rng.randint(-30, 30)))
        if wrong >= 0 and wrong not in avoid:
            return wrong


def dialogue(kind: str, task, rng: random.Random) -> tuple[list[dict], list[dict] | None]:
    """One supervised conversation of ``kind`` for ``task`` (messages, tools)."""
    msgs = TASKS[task.dataset].messages(task)
    if kind == "multiturn":  # earlier wrong answers are context only: masked from the loss
        avoid = {task.answer}
        for _ in range(1 if rng.random() < 0.65 else 2):
            wrong = _near_miss(rng, task.answer, avoid)
            avoid.add(wrong)
            msgs += [
                {"role": "assistant", "content": f"The answer is {wrong}.", "masked": True},
                {"role": "user", "content": FEEDBACK},
            ]
    if kind == "tool" and rng.random() < 0.7:
        expression = task.data["expression"]
        msgs += [
            {"role": "assistant", "content": tool_call_text(expression)},
            {"role": "tool", "content": calculator(expression)},
        ]
    msgs.append({"role": "assistant", "content": f"The answer is {task.answer}."})
    return msgs, [CALCULATOR_TOOL] if kind == "tool" else None


def held_back(task) -> bool:
    """Train-split problems never trained on: the early-stopping validation set."""
    digest = hashlib.sha256(f"val:{task.data['question']}".encode()).digest()
    return digest[0] < 26  # ~10%


# Batch kinds and their odds; "lines" is a plain-text arithmetic drill, the rest are chats.
KINDS = {"lines": 0.4, "arithmetic": 0.15, "tool": 0.15, "countdown": 0.1, "multiturn": 0.2}
DATASET = {"arithmetic": "arithmetic", "tool": "arithmetic", "countdown": "countdown", "multiturn": "multiturn"}


def make_corpus(n_per_kind: int) -> dict[str, list[tuple[list[dict], list[dict] | None]]]:
    rng = random.Random(SEED)
    corpus = {}
    for i, kind in enumerate(DATASET):
        tasks = TASKS[DATASET[kind]].tasks("train", n_per_kind, seed=SEED + i)
        corpus[kind] = [dialogue(kind, t, rng) for t in tasks if not held_back(t)]
    return corpus


# ------------------------------------------------------------------- tokenizer


def build_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """Byte-level BPE. Newlines and digits are pre-split into tokens of their own, so no merge
    crosses the "\\n" that ends a generation prompt and numbers are read digit by digit."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\n"), behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        min_frequency=2,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in MARKUP])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
        padding_side="left",
        model_max_length=2048,
    )


def encode(tok: PreTrainedTokenizerFast, convs) -> list[tuple[list[int], list[int]]]:
    """(input_ids, labels) per conversation; labels are -100 outside trained segments."""
    segs = [render(m, t) for m, t in convs]
    flat = [s for conv in segs for s, _ in conv]
    ids = iter(tok.backend_tokenizer.encode_batch(flat, add_special_tokens=False))
    out = []
    for conv in segs:
        input_ids: list[int] = []
        labels: list[int] = []
        for _, trained in conv:
            seg = next(ids).ids
            input_ids += seg
            labels += seg if trained else [-100] * len(seg)
        out.append((input_ids, labels))
    return out


# ------------------------------------------------------------------- evaluation

_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
WELL_FORMED = {
    "arithmetic": re.compile(r"The answer is -?\d+\."),
    "countdown": re.compile(r"The answer is [0-9+\-*() ]+\."),
}


@torch.no_grad()
def generate(model, tok, prompts: list[list[int]], sample: bool, max_new: int = 48) -> list[tuple[str, bool]]:
    """(text, ended with <|im_end|>) for each prompt of ids; batched, left-padded."""
    out: list[tuple[str, bool]] = []
    for i in range(0, len(prompts), 128):
        batch = tok.pad({"input_ids": prompts[i : i + 128]}, return_tensors="pt")
        kwargs = {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0} if sample else {"do_sample": False}
        gen = model.generate(**batch, max_new_tokens=max_new, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id, **kwargs)[:, batch["input_ids"].shape[1] :]
        for row in gen.tolist():
            ended = tok.eos_token_id in row
            row = row[: row.index(tok.eos_token_id)] if ended else row
            out.append((tok.decode(row), ended))
    return out


def run_episodes(model, tok, kind: str, tasks, sample: bool) -> dict[str, float]:
    """Play ``tasks`` like an agent would (retries, calculator calls); accuracy and format rate."""
    spec = TASKS[DATASET[kind]]
    tools = [CALCULATOR_TOOL] if kind == "tool" else None
    convs = [spec.messages(t) for t in tasks]
    final: list[str | None] = [None] * len(tasks)
    turns = [0] * len(tasks)
    formed = [False] * len(tasks)
    called = [False] * len(tasks)
    active = list(range(len(tasks)))
    for turn in range(1, 4):
        prompts = [tok.apply_chat_template(convs[i], tools=tools, add_generation_prompt=True, tokenize=True,
                                           return_dict=False) for i in active]
        replies = generate(model, tok, prompts, sample)
        still = []
        for i, (text, ended) in zip(active, replies):
            final[i], turns[i] = text, turn
            call = _TOOL_CALL.fullmatch(text) if kind == "tool" else None
            if call and ended and turn < 3:
                called[i] = True
                try:
                    expression = str(json.loads(call.group(1))["arguments"]["expression"])
                except (ValueError, KeyError, TypeError):
                    expression = ""
                convs[i] += [{"role": "assistant", "content": text}, {"role": "tool", "content": calculator(expression)}]
                still.append(i)
                continue
            formed[i] = ended and bool(WELL_FORMED.get(DATASET[kind], WELL_FORMED["arithmetic"]).fullmatch(text))
            feedback = spec.feedback(tasks[i], text, turn)
            if feedback is not None:
                convs[i] += [{"role": "assistant", "content": text}, {"role": "user", "content": feedback}]
                still.append(i)
        active = still
        if not active:
            break
    rewards = [spec.reward(t, final[i], turns=turns[i]) for i, t in enumerate(tasks)]
    first_try = [spec.is_correct(t, final[i]) and turns[i] == 1 for i, t in enumerate(tasks)]
    report = {
        "reward": sum(rewards) / len(tasks),
        "accuracy": sum(r > 0 for r in rewards) / len(tasks),
        "well_formed": sum(formed) / len(tasks),
    }
    if kind == "multiturn":
        report["first_turn_accuracy"] = sum(first_try) / len(tasks)
    if kind == "tool":
        report["tool_call_rate"] = sum(called) / len(tasks)
    return report


# ------------------------------------------------------------------- training


ROW = 256  # tokens per packed row of "lines"


def arithmetic_lines(tok: PreTrainedTokenizerFast, tasks) -> list[tuple[list[int], list[int]]]:
    """Plain-text drill, 2-3x denser in answer tokens than chat: "What is 2 + 3? The answer is 5.\n"."""
    enc = tok.backend_tokenizer.encode_batch
    questions = enc([f"What is {t.data['expression']}?" for t in tasks], add_special_tokens=False)
    answers = enc([f" The answer is {t.answer}.\n" for t in tasks], add_special_tokens=False)
    return [(q.ids + a.ids, [-100] * len(q.ids) + a.ids) for q, a in zip(questions, answers)]


def batches(data, rng: random.Random, tokens_per_batch: int, pad_id: int):
    """Endless (kind, input_ids [B, T], labels [B, T]), one kind per batch. "lines" are packed
    back to back into rows of ROW tokens; conversations are right-padded. No attention mask
    is needed: attention is causal and pads come last, so no real token sees one."""
    order: dict[str, list[int]] = {k: [] for k in KINDS}
    longest = {k: max(len(x) for x, _ in v) for k, v in data.items()}

    def take(kind: str) -> tuple[list[int], list[int]]:
        if not order[kind]:
            order[kind] = list(range(len(data[kind])))
            rng.shuffle(order[kind])
        return data[kind][order[kind].pop()]

    while True:
        kind = rng.choices(list(KINDS), list(KINDS.values()))[0]
        if kind == "lines":
            rows = []
            for _ in range(tokens_per_batch // ROW):
                x: list[int] = []
                y: list[int] = []
                while len(x) < ROW:
                    a, b = take(kind)
                    x, y = x + a, y + b
                rows.append((x[:ROW], y[:ROW]))
        else:
            rows = [take(kind) for _ in range(tokens_per_batch // longest[kind])]
        width = max(len(x) for x, _ in rows)
        ids = torch.full((len(rows), width), pad_id)
        labels = torch.full((len(rows), width), -100)
        for r, (x, y) in enumerate(rows):
            ids[r, : len(x)], labels[r, : len(y)] = torch.tensor(x), torch.tensor(y)
        yield kind, ids, labels


def lr_at(step: int, args) -> float:
    """Linear warmup, then cosine decay to a tenth. The decay matters: at a constant rate the
    model plateaus far lower (measured: 14% vs 51% held-out drill accuracy after 1200 steps)."""
    progress = min(1.0, step / args.steps)
    return args.lr * min(1.0, step / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(model, tok, data, val_tasks, args) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    stream = batches(data, random.Random(SEED), args.tokens_per_batch, tok.pad_token_id)
    t0 = time.time()
    ema: dict[str, float] = {}
    for step in range(1, args.steps + 1):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args)
        kind, ids, labels = next(stream)
        with torch.autocast("cpu", dtype=torch.bfloat16):  # ~25% faster on CPU; weights stay fp32
            loss = model(input_ids=ids, labels=labels).loss
        ema[kind] = loss.item() if kind not in ema else 0.9 * ema[kind] + 0.1 * loss.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % args.log_every == 0 or step == args.steps:
            model.eval()
            acc = run_episodes(model, tok, "arithmetic", val_tasks, sample=False)["accuracy"]
            model.train()
            losses = " ".join(f"{k} {v:.3f}" for k, v in sorted(ema.items()))
            print(f"step {step:5d}  loss: {losses}  held-back greedy acc {acc:.3f}  {time.time() - t0:5.0f}s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--steps", type=int, default=2500, help="fewer for a weaker model, more for a stronger")
    parser.add_argument("--log-every", type=int, default=250)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--tokens-per-batch", type=int, default=2048)
    parser.add_argument("--n-eval", type=int, default=200)
    args = parser.parse_args()
    start = time.time()
    random.seed(SEED)
    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)

    corpus = make_corpus(n_per_kind=20000)
    sample_texts = [s for kind in corpus.values() for m, t in kind[:3000] for s, _ in render(m, t)]
    tok = build_tokenizer(sample_texts)
    for kind in corpus:  # the Python renderer must agree with the jinja template, token for token
        for msgs, tools in corpus[kind][:20]:
            clean = [{k: v for k, v in m.items() if k != "masked"} for m in msgs]
            want = tok.apply_chat_template(clean, tools=tools, tokenize=True, return_dict=False)
            assert encode(tok, [(msgs, tools)])[0][0] == want, (kind, msgs)
    data = {kind: encode(tok, convs) for kind, convs in corpus.items()}
    drill = [t for t in TASKS["arithmetic"].tasks("train", 20000, seed=SEED + 10) if not held_back(t)]
    data["lines"] = arithmetic_lines(tok, drill)
    print(f"tokenizer: {len(tok)} tokens; examples: { {k: len(v) for k, v in data.items()} }; "
          f"longest {max(len(x) for v in data.values() for x, _ in v)} tokens; {time.time() - start:.1f}s")

    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=128, intermediate_size=512, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=2048,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters")
    val_tasks = [t for t in TASKS["arithmetic"].tasks("train", 1000, seed=99) if held_back(t)][:128]
    model.train()
    train(model, tok, data, val_tasks, args)
    train_s = time.time() - start
    model.eval()

    report: dict[str, Any] = {"parameters": n_params, "steps": args.steps, "vocab_size": len(tok), "seed": SEED}
    for mode in ("greedy", "sampled"):
        torch.manual_seed(SEED)
        report[mode] = {}
        for kind in DATASET:
            tasks = TASKS[DATASET[kind]].tasks("test", args.n_eval, seed=0)
            report[mode][kind] = run_episodes(model, tok, kind, tasks, sample=mode == "sampled")
    report["build_seconds"] = round(time.time() - start, 1)
    report["train_seconds"] = round(train_s, 1)

    args.out.mkdir(parents=True, exist_ok=True)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(args.out)
    tok.save_pretrained(args.out)
    (args.out / "training_report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    for f in sorted(args.out.iterdir()):
        print(f"{f.name:28s} {f.stat().st_size:>10,d} bytes")


if __name__ == "__main__":
    main()
