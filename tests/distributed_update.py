"""One policy update of the tiny model, alone or as one rank of ``torchrun`` (gloo), for
tests/test_distributed.py: ``python distributed_update.py OUT`` writes OUT/result.pt (rank 0).

The update runs twice from the same weights: with SGD at lr 1 (so the weights' change is
minus the gradient) and with the run's AdamW; both are compared with the one-process run.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from tracerl.models import tiny_model_path
from tracerl.trainers import distributed
from tracerl.trainers.batching import Row
from tracerl.trainers.config import TrainConfig
from tracerl.trainers.update import make_optimizer, policy_update


def rows(n: int = 7) -> list[Row]:
    rng = random.Random(0)
    out = []
    for i in range(n):
        length = rng.randint(6, 40)  # uneven: the ranks get different numbers of micro-batches
        ids = [rng.randrange(3, 200) for _ in range(length + 1)]
        mask = [0] * 3 + [1] * (length - 3)
        adv = (i % 3 - 1) * 0.7 + 0.1
        out.append(Row(ids[:-1], ids[1:], mask, [adv * m for m in mask],
                       [-2.0 * m + rng.uniform(-0.05, 0.05) * m for m in mask]))
    return out


def main(out: Path) -> None:
    torch.manual_seed(0)
    group, _device = distributed.init("cpu")
    cfg = TrainConfig.model_validate({"loss": {"kl_beta": 0.05}, "optim": {"epochs": 2, "micro_batch_tokens": 64,
                                                                            "grad_clip": None}})
    result: dict[str, object] = {}
    for name in ("sgd", "adamw"):
        model = distributed.shard(AutoModelForCausalLM.from_pretrained(tiny_model_path()), group)
        ref = distributed.shard(AutoModelForCausalLM.from_pretrained(tiny_model_path()).requires_grad_(False), group)
        if name == "sgd":
            optimizer: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
            scheduler = None
        else:
            optimizer, scheduler = make_optimizer(model, cfg, 10)
        metrics = policy_update(model, optimizer, scheduler, rows(), cfg, ref_model=ref, temperature=0.9,
                                group=group)
        weights = distributed.full_state_dict(model) if group.active else model.state_dict()
        result[name] = {"metrics": metrics, "weights": {k: v.detach().clone() for k, v in weights.items()}}
    result["initial"] = AutoModelForCausalLM.from_pretrained(tiny_model_path()).state_dict()
    result["world"] = group.world
    if group.main:
        torch.save(result, out / "result.pt")
    if group.active:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
