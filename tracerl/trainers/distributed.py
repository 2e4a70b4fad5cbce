"""Several processes, one update: PyTorch's FSDP2 (``fully_shard``) under ``torchrun``.

    tracerl train arithmetic --nproc 2          # re-runs itself under torchrun
    torchrun --nproc-per-node 2 -m tracerl train arithmetic

Rank 0 is the run: it owns the gateway, the engine, the rollouts, evaluation, metrics and the
checkpoint files. Every rank holds a shard of the policy's weights, gradients and optimizer
state. Rank 0 tells the others what to do next (:meth:`Group.tell`), and they do it in the same
order (:func:`tracerl.trainers.loop` has the follower's side), because FSDP's collectives need
every rank in every forward and backward: an update on its share of the batch's rows, a gather
of the full weights (for the engine or a checkpoint), or stop.

The gradient of the batch is the sum of the ranks' gradients: each rank's loss is its rows'
share of the batch loss (divided by the normaliser of the *whole* batch), and FSDP's
reduce-scatter sums instead of averaging (divide factor 1). So one step on N ranks equals one
step in one process, whatever the split, which tests/test_distributed.py checks with gloo.
Nothing here is home-made data parallelism: sharding, gathering and the reduction are FSDP's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tracerl.core.errors import ConfigError

__all__ = ["SINGLE", "Group", "full_optimizer_state", "full_state_dict", "init", "load_optimizer_state", "shard"]


@dataclass(frozen=True)
class Group:
    """This process's place among the run's processes (``SINGLE`` when there is one)."""

    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1

    def tell(self, command: str, *args: Any) -> None:
        """Rank 0: send the next command to every other rank (nothing when alone, or from the
        others, which are carrying the command out)."""
        if self.active and self.main:
            _broadcast([command, args])

    def commands(self) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """Ranks > 0: the commands rank 0 sends, until it says ``stop``."""
        while True:
            command, args = _broadcast(None)
            if command == "stop":
                return
            yield command, args

    def share(self, rows: Sequence[Any]) -> list[Any]:
        """This rank's rows: longest first to the rank with the fewest tokens so far, so every
        rank gets about the same number of tokens (and the same split on every rank)."""
        if not self.active:
            return list(rows)
        load = [0] * self.world
        mine = []
        for i in sorted(range(len(rows)), key=lambda i: (-len(rows[i]), i)):
            rank = min(range(self.world), key=lambda r: (load[r], r))
            load[rank] += len(rows[i])
            if rank == self.rank:
                mine.append(rows[i])
        return mine

    def max(self, value: int) -> int:
        """The largest ``value`` of all ranks."""
        return int(self._reduce([float(value)], "max")[0]) if self.active else value

    def sum(self, values: list[float]) -> list[float]:
        return self._reduce(values, "sum") if self.active else values

    def combine(self, sums: dict[str, float], maxima: dict[str, float]
                ) -> tuple[dict[str, float], dict[str, float]]:
        """The batch's metrics from every rank's part: ``sums`` added, ``maxima`` maxed (a rank
        that had no rows to report on may lack keys the others have)."""
        if not self.active:
            return sums, maxima
        import torch.distributed as dist

        everyone: list[Any] = [None] * self.world
        dist.all_gather_object(everyone, (sorted(sums), sorted(maxima)))
        sum_keys = sorted({k for keys, _ in everyone for k in keys})
        max_keys = sorted({k for _, keys in everyone for k in keys})
        added = self._reduce([sums.get(k, 0.0) for k in sum_keys], "sum")
        maxed = self._reduce([maxima.get(k, float("-inf")) for k in max_keys], "max")
        return dict(zip(sum_keys, added, strict=True)), dict(zip(max_keys, maxed, strict=True))

    def _reduce(self, values: list[float], op: str) -> list[float]:
        import torch
        import torch.distributed as dist

        if not values:
            return values
        device = "cuda" if dist.get_backend() == "nccl" else "cpu"
        t = torch.tensor(values, dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
        return [float(v) for v in t.tolist()]


SINGLE = Group()


def _broadcast(obj: Any) -> Any:
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def init(device: str | None) -> tuple[Group, str | None]:
    """Join the process group torchrun set up (``WORLD_SIZE`` > 1); returns it and this
    rank's device (``cuda:LOCAL_RANK`` on GPUs). One process: ``SINGLE`` and ``device``."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return SINGLE, device
    import torch
    import torch.distributed as dist

    cuda = (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")
    if cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    else:
        device = "cpu"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return Group(dist.get_rank(), dist.get_world_size()), device


def shard(model: Any, group: Group) -> Any:
    """``model`` with ``fully_shard`` on each decoder layer and on the whole (FSDP2)."""
    if not group.active:
        return model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard

    if _is_peft(model):
        raise ConfigError("LoRA with --nproc > 1 is not supported: adapters are small enough to train in "
                          "one process; drop --nproc, or train the full model")
    device_type = next(model.parameters()).device.type
    mesh = init_device_mesh(device_type, (group.world,))
    # the unit of sharding is the transformer block: one all-gather per layer per pass
    blocks = set(getattr(model, "_no_split_modules", None) or ())
    for module in model.modules():
        if type(module).__name__ in blocks:
            fully_shard(module, mesh=mesh)
    fully_shard(model, mesh=mesh)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)  # sum the ranks' shares of the batch loss
            module.set_force_sum_reduction_for_comms(True)  # a plain SUM (gloo has no PREMUL_SUM)
    return model


def _is_peft(model: Any) -> bool:
    return any(type(c).__name__ == "PeftModel" for c in type(model).__mro__)


def full_state_dict(model: Any) -> dict[str, Any]:
    """Every rank calls it; rank 0 gets the full weights on the CPU, the others ``{}``."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def full_optimizer_state(model: Any, optimizer: Any) -> dict[str, Any]:
    """Every rank calls it; rank 0 gets the optimizer state exactly as one process's
    ``optimizer.state_dict()`` has it (parameters numbered), so checkpoints are one format."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    state: Any = get_optimizer_state_dict(model, optimizer,
                                          options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if not state:
        return {}
    number = {name: i for i, name in enumerate(_trainable_names(model))}
    return {"state": {number[k]: v for k, v in state["state"].items()},
            "param_groups": [{**g, "params": [number[p] for p in g["params"]]} for g in state["param_groups"]]}


def load_optimizer_state(model: Any, optimizer: Any, state: dict[str, Any]) -> None:
    """Every rank: a checkpoint's optimizer state (one process's format), each keeping its shard."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    names = _trainable_names(model)
    named: Any = {"state": {names[int(k)]: v for k, v in state["state"].items()},
             "param_groups": [{**g, "params": [names[int(p)] for p in g["params"]]} for g in state["param_groups"]]}
    set_optimizer_state_dict(model, optimizer, optim_state_dict=named, options=StateDictOptions(full_state_dict=True))


def _trainable_names(model: Any) -> list[str]:
    # the order make_optimizer gave the optimizer its parameters in: model.parameters()'s
    return [name for name, p in model.named_parameters() if p.requires_grad]
