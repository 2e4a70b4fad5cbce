"""Check tracerl's in-process vLLM engine against vLLM's own code, on a CPU (docs/gpu.md).

    python bench/vllm_contract.py            # makes runs/vllm-contract/venv once, then checks

No GPU and no vLLM in the test environment, so this runs apart from ``make test``, in a
virtualenv of its own holding vLLM 0.33.0 (``pip install --no-deps``) and the pure-Python
modules its front end imports; torch and transformers are the project's (a ``.pth`` file
points at them), so no multi-GB CUDA build is downloaded. ``vllm._C`` is never loaded.

What runs is tracerl's real ``VLLMEngine`` (its constructor, ``generate`` from another event
loop, ``sleep``, ``update_weights``, ``shutdown``), against a stand-in for vLLM's ``AsyncLLM``
that checks every call the way vLLM would take it:

* each method is bound (``inspect.signature(...).bind``) against ``AsyncLLM``'s own, and is a
  coroutine (or async generator) exactly where the engine awaits it;
* every call happens on the one event loop the engine was built in (vLLM's client binds its
  output reader to that loop for good);
* the weight-transfer requests are vLLM's own dataclasses; what each carries is encoded with
  vLLM's ``MsgpackEncoder`` and decoded with the untyped ``MsgpackDecoder``, as the front end
  and the engine core do with a ``collective_rpc`` utility call, then parsed by the IPC
  backend's own ``parse_init_info`` / ``parse_update_info`` (with their validation), and
  each handle is turned back into ``rebuild_cuda_tensor``'s arguments as the worker does;
* ``SamplingParams`` round-trips through the typed decoder; the prompt is vLLM's
  ``tokens_input``; outputs are vLLM's ``RequestOutput`` / ``CompletionOutput`` / ``Logprob``.

CUDA calls (``.cuda()``, IPC ``reduce_tensor``, device uuids) are replaced by CPU stand-ins
with the same shapes of data: ``reduce_tensor`` returns arguments of the types torch's CUDA
branch returns (classes, a dtype, bytes handles).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / "runs" / "vllm-contract" / "venv"
VLLM = "vllm==0.33.0"
# what vLLM 0.33's front end imports beyond torch and transformers (its own pins where it has one)
EXTRAS = ["msgspec==0.23.0", "pyzmq==27.3.0", "cbor2==6.3.0", "oss-harmony==0.0.11", "pybase64==1.5.1",
          "py-cpuinfo==9.0.0", "prometheus-client==0.26.0", "xgrammar==0.2.8", "apache-tvm-ffi==0.1.11",
          "partial-json-parser==0.2.1.1.post7", "llguidance==1.7.6", "cloudpickle==3.1.2"]
GPU_UUID = "GPU-00000000-contract"


def setup() -> Path:
    """The contract venv's python, made once: vLLM without its dependencies, the project's torch."""
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        site = next(Path(p) for p in sys.path if p.endswith("site-packages") and "vllm-contract" not in p)
        pth = next((VENV / "lib").glob("python*/site-packages")) / "tracerl-project.pth"
        pth.write_text(f"{site}\n{REPO}\n")  # torch, transformers, tracerl itself
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", VLLM, *EXTRAS], check=True)
    return python


class Checked:
    """Stands in for vLLM's AsyncLLM: binds each call to AsyncLLM's signature, on one loop."""

    def __init__(self, log: list[str]):
        from vllm.v1.engine.async_llm import AsyncLLM

        self.real, self.log = AsyncLLM, log
        self.loop = asyncio.get_running_loop()  # built inside the engine's loop, or this raises
        self.model_config = types.SimpleNamespace(max_model_len=2048)
        self.prefix_resets = 0
        self.weights: dict[str, list[Any]] = {}

    def _bind(self, name: str, kind: str, *args: Any, **kwargs: Any) -> inspect.BoundArguments:
        fn = getattr(self.real, name)
        found = ("asyncgen" if inspect.isasyncgenfunction(fn) else "coroutine" if inspect.iscoroutinefunction(fn)
                 else "sync")
        assert found == kind, f"AsyncLLM.{name} is {found}, the engine treats it as {kind}"
        bound = inspect.signature(fn).bind(self, *args, **kwargs)
        assert asyncio.get_running_loop() is self.loop, f"AsyncLLM.{name} called on another event loop"
        self.log.append(f"{name}{_short(inspect.signature(fn))}  <-  {dict(list(bound.arguments.items())[1:])!s:.150}")
        return bound

    async def generate(self, prompt: Any, sampling_params: Any, request_id: str, **kw: Any) -> Any:
        from vllm.logprobs import Logprob
        from vllm.outputs import CompletionOutput, RequestOutput
        from vllm.sampling_params import SamplingParams
        from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

        self._bind("generate", "asyncgen", prompt, sampling_params, request_id, **kw)
        assert prompt["type"] == "token" and isinstance(prompt["prompt_token_ids"], list), prompt
        assert isinstance(sampling_params, SamplingParams) and sampling_params.logprobs == 0
        again = MsgpackDecoder(SamplingParams).decode(MsgpackEncoder().encode(sampling_params))
        assert again == sampling_params, (again, sampling_params)  # as it reaches the engine core
        ids = [11, 12, 13]
        logprobs = [{t: Logprob(logprob=-0.5 * (i + 1), rank=1)} for i, t in enumerate(ids)]
        out = CompletionOutput(index=0, text="", token_ids=ids, cumulative_logprob=-3.0, logprobs=logprobs,
                               finish_reason="length", stop_reason=None)
        yield RequestOutput(request_id=request_id, prompt=None, prompt_token_ids=prompt["prompt_token_ids"],
                            prompt_logprobs=None, outputs=[out], finished=True)

    async def sleep(self, *args: Any, **kwargs: Any) -> None:
        bound = self._bind("sleep", "coroutine", *args, **kwargs)
        assert bound.arguments["level"] == 2 and bound.arguments["mode"] in ("abort", "wait", "keep")

    async def wake_up(self, *args: Any, **kwargs: Any) -> bool:
        bound = self._bind("wake_up", "coroutine", *args, **kwargs)
        assert set(bound.arguments["tags"]) <= {"weights", "kv_cache", "scheduling"}
        return "kv_cache" in bound.arguments["tags"]

    async def reset_prefix_cache(self, *args: Any, **kwargs: Any) -> bool:
        self._bind("reset_prefix_cache", "coroutine", *args, **kwargs)
        self.prefix_resets += 1
        return self.prefix_resets % 2 == 0  # the first says "requests running": the engine must retry

    async def init_weight_transfer_engine(self, *args: Any, **kwargs: Any) -> None:
        from vllm.distributed.weight_transfer.base import WeightTransferInitRequest
        from vllm.distributed.weight_transfer.ipc_engine import IPCWeightTransferEngine

        request = self._bind("init_weight_transfer_engine", "coroutine", *args, **kwargs).arguments["request"]
        assert isinstance(request, WeightTransferInitRequest)
        info = _worker_side("init_weight_transfer_engine", {"init_info": request.init_info})["init_info"]
        parsed = object.__new__(IPCWeightTransferEngine).parse_init_info(info)
        assert parsed.packed is False

    async def start_weight_update(self, *args: Any, **kwargs: Any) -> None:
        self._bind("start_weight_update", "coroutine", *args, **kwargs)

    async def update_weights(self, *args: Any, **kwargs: Any) -> None:
        import torch
        from torch.multiprocessing.reductions import rebuild_cuda_tensor
        from vllm.distributed.weight_transfer.base import WeightTransferUpdateRequest
        from vllm.distributed.weight_transfer.ipc_engine import IPCWeightTransferEngine

        request = self._bind("update_weights", "coroutine", *args, **kwargs).arguments["request"]
        assert isinstance(request, WeightTransferUpdateRequest)
        info = _worker_side("update_weights", {"update_info": request.update_info})["update_info"]
        parsed = object.__new__(IPCWeightTransferEngine).parse_update_info(info)  # validates the lengths
        for name, shape, handle in zip(parsed.names, parsed.shapes, parsed.ipc_handles):  # as receive_weights
            args = list(handle[GPU_UUID])
            args[6] = 0  # the receiver's device index
            bound = inspect.signature(rebuild_cuda_tensor).bind(*args)
            assert bound.arguments["tensor_cls"] is torch.Tensor and isinstance(bound.arguments["dtype"], torch.dtype)
            assert list(bound.arguments["tensor_size"]) == shape
            self.weights[name] = shape

    async def finish_weight_update(self, *args: Any, **kwargs: Any) -> None:
        self._bind("finish_weight_update", "coroutine", *args, **kwargs)

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        self._bind("shutdown", "sync", *args, **kwargs)


def _short(sig: inspect.Signature) -> str:
    """A signature without its long annotations: the parameter names and defaults vLLM has."""
    return "(" + ", ".join(str(p.replace(annotation=inspect.Parameter.empty)) for p in sig.parameters.values()) + ")"


def _worker_side(method: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` as a worker receives them: AsyncLLM.collective_rpc -> call_utility_async
    encodes ``(client, call_id, "collective_rpc", (method, timeout, args, kwargs))`` with the
    client's MsgpackEncoder; the engine core decodes it with an untyped MsgpackDecoder."""
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    frames = MsgpackEncoder().encode((0, 1, "collective_rpc", (method, None, (), kwargs)))
    _client, _call, utility, (name, _timeout, _args, decoded) = MsgpackDecoder().decode(frames)
    assert (utility, name) == ("collective_rpc", method)
    return decoded


def _cpu_stand_ins() -> None:
    """CUDA's parts on a CPU: a GPU uuid, ``.cuda()``, synchronisation, and ``reduce_tensor``
    giving the argument types of torch's CUDA branch (rebuild_cuda_tensor's)."""
    import torch
    import torch.multiprocessing.reductions as reductions

    def reduce_tensor(t: torch.Tensor) -> tuple[Any, tuple[Any, ...]]:
        storage = t.untyped_storage()
        return reductions.rebuild_cuda_tensor, (
            type(t), t.size(), t.stride(), t.storage_offset(), type(storage), t.dtype, 0, b"\x01" * 64,
            storage.nbytes(), 0, t.requires_grad, b"\x02" * 16, 0, b"\x03" * 64, True)

    reductions.reduce_tensor = reduce_tensor
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.ipc_collect = lambda: None
    torch.cuda.empty_cache = lambda: None
    torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(uuid=GPU_UUID)
    torch.Tensor.cuda = lambda self, *a, **k: self  # type: ignore[method-assign]


def check() -> dict[str, Any]:
    import torch
    import vllm
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    from tracerl.engines import vllm_engine
    from tracerl.engines.base import SamplingParams
    from tracerl.models import tiny_model_path

    log: list[str] = []
    result: dict[str, Any] = {"vllm": vllm.__version__, "torch": torch.__version__}
    vllm_engine.check_version(vllm.__version__)
    os.environ.pop(vllm_engine.INSECURE_SERIALIZATION, None)
    # without the variable, vLLM's encoder refuses what an IPC handle holds (a class, a dtype)
    try:
        MsgpackEncoder().encode((torch.Tensor, torch.bfloat16))
        result["handles_refused_without_insecure_serialization"] = False
    except TypeError:
        result["handles_refused_without_insecure_serialization"] = True
    model = str(tiny_model_path())
    args = vllm_engine.engine_args(model, gpu_memory_utilization=0.3, max_model_len=None, seed=0,
                                   enable_sleep_mode=True, enforce_eager=True, dtype="bfloat16")
    assert args.logprobs_mode == "processed_logprobs" and args.weight_transfer_config.backend == "ipc"
    made: list[Checked] = []
    sig = inspect.signature(AsyncLLM.from_engine_args)  # a classmethod: cls is bound already

    def from_engine_args(engine_args: Any, *a: Any, **k: Any) -> Checked:
        sig.bind(engine_args, *a, **k)
        assert type(engine_args).__name__ == "AsyncEngineArgs"
        log.append(f"from_engine_args{_short(sig)}  <-  AsyncEngineArgs(logprobs_mode={engine_args.logprobs_mode!r}, "
                   f"enable_sleep_mode={engine_args.enable_sleep_mode}, weight_transfer_config="
                   f"{engine_args.weight_transfer_config})")
        made.append(Checked(log))
        return made[-1]

    AsyncLLM.from_engine_args = from_engine_args  # type: ignore[method-assign,assignment]
    _cpu_stand_ins()
    engine = vllm_engine.VLLMEngine(model, model_name="tiny", gpu_memory_utilization=0.3, enable_sleep_mode=True,
                                    bucket_bytes=64 * 1024, enforce_eager=True, dtype="bfloat16")
    assert os.environ[vllm_engine.INSECURE_SERIALIZATION] == "1"  # set before the engine core would start
    (stand_in,) = made
    assert stand_in.loop is engine._loop  # built inside the engine's own loop
    gens = asyncio.run(engine.generate([1, 2, 3], SamplingParams(max_tokens=3, temperature=0.7, seed=1)))
    assert gens[0].token_ids == [11, 12, 13] and gens[0].logprobs == [-0.5, -1.0, -1.5] and \
        gens[0].finish_reason == "length"
    # a second loop after the first one closed: the engine's own loop still serves it
    gens = asyncio.run(engine.generate([4, 5], SamplingParams(max_tokens=3)))
    assert gens[0].weight_version == 0
    engine.sleep()
    from transformers import AutoModelForCausalLM

    state = AutoModelForCausalLM.from_pretrained(model).state_dict()
    engine.update_weights(state, 3)
    assert stand_in.weights.keys() == state.keys() and engine.weight_version == 3
    engine.shutdown()
    assert not engine._thread.is_alive()
    calls = [line.split("(")[0] for line in log]
    updates = calls.count("update_weights")
    assert updates == sum(1 for _ in vllm_engine.buckets(state, 64 * 1024)) > 1  # bounded buckets
    assert calls[-1] == "shutdown"
    # IPC handles pass only with the variable set, which the engine did before the core starts
    frames = MsgpackEncoder().encode((torch.Tensor, torch.bfloat16, b"\x01"))
    assert MsgpackDecoder().decode(frames)[1] is torch.bfloat16
    result.update({
        "vllm._C loaded": "vllm._C" in sys.modules, "weights": len(state), "update_weights calls": updates,
        "prefix cache resets": stand_in.prefix_resets,
        "calls": [f"{calls.count(c)} x {next(line for line in log if line.startswith(c + '('))}"
                  for c in dict.fromkeys(calls)],
    })
    return result


def main() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        python = setup()
        raise SystemExit(subprocess.run([str(python), __file__, *sys.argv[1:]]).returncode) from None
    result = check()
    print(json.dumps({k: v for k, v in result.items() if k != "calls"}, indent=2))
    print("\n".join(["AsyncLLM calls in order, each bound to vLLM's signature (first arguments shown):",
                     *result["calls"]]))
    print(f"OK: tracerl's VLLMEngine against vLLM {result['vllm']}'s own signatures and serializers")


if __name__ == "__main__":
    main()
