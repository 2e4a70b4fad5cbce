"""A second, wider model for speed benchmarks: the bundled tokenizer, a larger Llama, random weights.

    .venv/bin/python scripts/build_wide_model.py [--out runs/models/wide] [--hidden 256] [--layers 4]

bench/vs_trl.py --model runs/models/wide measures both trainers' step time where the model's
compute weighs more than on the bundled one (about 4.3M parameters by default, 4x as many).
Its weights are random (seeded), so it learns nothing in a benchmark's few steps: use it for
seconds and tokens per second, never for accuracy. Nothing is downloaded; it takes seconds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from tracerl.models import tiny_model_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/models/wide"))
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    tok = AutoTokenizer.from_pretrained(tiny_model_path())
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=args.hidden, intermediate_size=4 * args.hidden,
        num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64, num_key_value_heads=args.hidden // 64,
        max_position_embeddings=2048, tie_word_embeddings=True, bos_token_id=None,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(args.out)
    tok.save_pretrained(args.out)
    print(f"{args.out}: {model.num_parameters():,} parameters (random weights: for speed, not accuracy)")


if __name__ == "__main__":
    main()
