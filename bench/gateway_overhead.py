"""Gateway overhead (null engine, real HTTP) and TorchEngine batching (tiny model).

(a) What the gateway adds. A NULL engine answers a fixed 5-token reply at once; the gateway
    serves it over real HTTP from its own process (``GatewayServer``: uvicorn in a thread, the
    span store in a temporary SQLite file), so the chat template, validation, the span write
    (committed before each answer) and the HTTP stack are all paid. The load generator is
    another process: ``wrk`` when installed (C, a Lua script reports p50/p95/p99), else a
    small asyncio HTTP/1.1 keep-alive client (``--loadgen python``). For each number of
    concurrent clients it reports latency p50/p95, requests/s and the server's CPU time per
    request, against ``await engine.generate(...)`` called directly in this process.
    ``--gateway-ref REF ...`` serves the gateway package as it was at each git ``REF`` in turn
    (``WORKTREE``: as checked out; the rest of tracerl stays as checked out): a before/after
    on the same machine in one run.

(b) TorchEngine on the tiny model: the same ``--requests`` chat prompts, ``--max-tokens``
    each, submitted concurrently to a batching engine (defaults: 32 rows, 5 ms window)
    versus one at a time (``max_batch_size=1``); tokens/s of each. Each torch thread
    count in ``--threads`` runs in a fresh process (torch fixes a thread's count on its first
    parallel op).

    python bench/gateway_overhead.py                        # both parts
    python bench/gateway_overhead.py --part gateway --clients 1 32 --gateway-ref HEAD WORKTREE
    python bench/gateway_overhead.py --part gateway --routes chat responses   # the Responses API's cost
    python bench/gateway_overhead.py --part engine --threads 1 2
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = [{"role": "system", "content": "You are a careful math agent. Use the calculator tool when needed."},
            {"role": "user", "content": "What is 12 + 30? Think, then answer with the number only."}]
BODY = {"model": "tracerl-tiny", "messages": MESSAGES, "max_tokens": 16}
# the same call through the Responses API (what the OpenAI Agents SDK's default model sends)
RESPONSES_BODY = {"model": "tracerl-tiny", "instructions": MESSAGES[0]["content"], "max_output_tokens": 16,
                  "input": [{"role": "user", "content": MESSAGES[1]["content"]}]}
ROUTES = {"chat": "chat/completions", "responses": "responses"}


def _body_for(url: str) -> dict[str, Any]:
    return RESPONSES_BODY if url.endswith("/responses") else BODY
REPLY = "The answer is 42."


# -- the null engine ----------------------------------------------------------------------

class NullEngine:
    """Answers every prompt with the same few tokens, instantly: what is left is overhead."""

    model_name = "tracerl-tiny"
    weight_version = 0
    max_context = 4096

    def __init__(self, tokenizer: Any):
        from tracerl.engines.base import Generation

        self.tokenizer = tokenizer
        ids = [*tokenizer.encode(REPLY, add_special_tokens=False), tokenizer.eos_token_id]
        self._gen = Generation(ids, [-0.5] * len(ids), "stop", 0, tokenizer.eos_token_id)

    async def generate(self, prompt_ids: list[int], params: Any) -> list[Any]:
        return [self._gen] * params.n

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        self.weight_version = version

    async def close(self) -> None:
        pass


def _model_path(arg: str | None) -> str:
    if arg:
        return arg
    from tracerl.models import tiny_model_path

    return str(tiny_model_path())


def _tokenizer(model: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))]


# -- (a) the server process ---------------------------------------------------------------

def _gateway_from_ref(ref: str) -> str:
    """Import ``tracerl.gateway`` as it was at git ``ref`` (files extracted to a temp dir)."""
    out = Path(tempfile.mkdtemp(prefix="gateway-ref-"))
    names = subprocess.run(["git", "ls-tree", "--name-only", ref, "tracerl/gateway/"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for name in names:
        if name.endswith(".py"):
            text = subprocess.run(["git", "show", f"{ref}:{name}"], cwd=ROOT, check=True,
                                  capture_output=True, text=True).stdout
            (out / Path(name).name).write_text(text)
    spec = importlib.util.spec_from_file_location("tracerl.gateway", out / "__init__.py",
                                                  submodule_search_locations=[str(out)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tracerl.gateway"] = module
    spec.loader.exec_module(module)
    return subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()


def serve(args: argparse.Namespace) -> None:
    """Child process: serve the null engine until stdin closes."""
    version = _gateway_from_ref(args.gateway_ref) if args.gateway_ref else "working tree"
    from tracerl.core.store import SpanStore
    from tracerl.gateway import GatewayServer

    engine = NullEngine(_tokenizer(_model_path(args.model)))
    with tempfile.TemporaryDirectory() as tmp, SpanStore(Path(tmp) / "bench.db") as store, \
            GatewayServer(engine, store, port=args.port) as gw:
        config = gw._server.config
        print(json.dumps({"url": gw.url, "gateway": version, "http": getattr(config, "http", "?"),
                          "loop": getattr(config, "loop", "?"), "http_impl": _impl("httptools"),
                          "loop_impl": _impl("uvloop")}), flush=True)
        sys.stdin.read()  # the parent closes stdin when done
        print(json.dumps({"spans": store.count()}), flush=True)


def _impl(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _cpu_s(pid: int) -> float:
    """utime + stime of a process (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- (a) load generators ------------------------------------------------------------------

_WRK_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [==[%s]==]
done = function(summary, latency, requests)
  io.write(string.format('{"requests": %%d, "duration_s": %%f, "errors": %%d, "p50_ms": %%f, "p95_ms": %%f, "p99_ms": %%f}\\n',
    summary.requests, summary.duration / 1e6,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50) / 1e3, latency:percentile(95) / 1e3, latency:percentile(99) / 1e3))
end
"""


def _wrk(url: str, clients: int, seconds: float) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(_WRK_LUA % json.dumps(_body_for(url)))
    try:
        out = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--timeout", "10s", "-s", fh.name, url],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(fh.name)
    doc = json.loads(out.strip().splitlines()[-1])
    doc["rps"] = doc["requests"] / doc["duration_s"]
    return doc


def loadgen(args: argparse.Namespace) -> None:
    """Child process: ``--clients`` keep-alive HTTP/1.1 connections for ``--seconds``; JSON out."""
    host, _, rest = args.url.removeprefix("http://").partition(":")
    port, _, path = rest.partition("/")
    body = json.dumps(_body_for(args.url)).encode()
    request = (f"POST /{path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    latencies: list[float] = []
    errors = 0

    async def client(deadline: float) -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection(host, int(port))
        while time.perf_counter() < deadline:
            t = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - t)
            errors += head[9:12] != b"200"
        writer.close()

    async def main() -> float:
        start = time.perf_counter()
        await asyncio.gather(*(client(start + args.seconds) for _ in range(args.clients)))
        return time.perf_counter() - start

    elapsed = asyncio.run(main())
    print(json.dumps({"requests": len(latencies), "duration_s": elapsed, "errors": errors,
                      "rps": len(latencies) / elapsed, "p50_ms": _pct(latencies, 50) * 1e3,
                      "p95_ms": _pct(latencies, 95) * 1e3, "p99_ms": _pct(latencies, 99) * 1e3}))


def _python_loadgen(url: str, clients: int, seconds: float) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "_loadgen", "--url", url, "--clients", str(clients),
                          "--seconds", str(seconds)], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# -- (a) the direct call ------------------------------------------------------------------

def direct(model: str, clients: int, seconds: float) -> dict[str, Any]:
    """``await engine.generate`` from ``clients`` concurrent tasks, no gateway."""
    from tracerl.engines.base import SamplingParams

    tok = _tokenizer(model)
    engine = NullEngine(tok)
    prompt = list(tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True, return_dict=False))
    params = SamplingParams(max_tokens=16)
    latencies: list[float] = []

    async def client(deadline: float) -> None:
        while time.perf_counter() < deadline:
            t = time.perf_counter()
            await engine.generate(prompt, params)
            latencies.append(time.perf_counter() - t)
            await asyncio.sleep(0)  # let the other clients in, as awaiting a socket would

    async def main() -> float:
        start = time.perf_counter()
        await asyncio.gather(*(client(start + seconds) for _ in range(clients)))
        return time.perf_counter() - start

    elapsed = asyncio.run(main())
    return {"requests": len(latencies), "rps": len(latencies) / elapsed, "p50_ms": _pct(latencies, 50) * 1e3,
            "p95_ms": _pct(latencies, 95) * 1e3}


def _start_server(ref: str, model: str | None) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    cmd = [sys.executable, __file__, "_serve", "--port", str(_free_port())]
    cmd += ["--gateway-ref", ref] if ref != "WORKTREE" else []
    cmd += ["--model", model] if model else []
    server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return server, json.loads(server.stdout.readline())  # type: ignore[union-attr]


def gateway_part(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every gateway version is served at once and the runs interleave (version A, B, A, B...),
    so a change in the machine's background load hits all versions alike."""
    use_wrk = args.loadgen == "wrk" or (args.loadgen == "auto" and shutil.which("wrk"))
    run = _wrk if use_wrk else _python_loadgen
    servers = [_start_server(ref, args.model) for ref in args.gateway_ref or ["WORKTREE"]]
    rows = []
    try:
        for _, info in servers:
            print(f"# gateway {info['gateway']} at {info['url']}: uvicorn http={info['http']} "
                  f"(httptools installed: {info['http_impl']}), loop={info['loop']} "
                  f"(uvloop installed: {info['loop_impl']}); load: {'wrk' if use_wrk else 'python asyncio'}")
            run(info["url"] + "/sessions/warm-up/v1/chat/completions", 4, 1.0)
        for clients in args.clients:
            cases = [(k, route) for k in range(len(servers)) for route in args.routes]
            results: dict[tuple[int, str], list[dict[str, Any]]] = {case: [] for case in cases}
            for _ in range(args.repeats):
                for k, route in cases:
                    server, info = servers[k]
                    cpu = _cpu_s(server.pid)
                    res = run(info["url"] + f"/sessions/bench/v1/{ROUTES[route]}", clients, args.seconds)
                    res["server_cpu_us"] = (_cpu_s(server.pid) - cpu) / max(1, res["requests"]) * 1e6
                    res["load"] = os.getloadavg()[0]
                    results[(k, route)].append(res)
            for k, route in cases:
                info = servers[k][1]
                runs = sorted(results[(k, route)], key=lambda r: r["rps"])
                best = runs[len(runs) // 2]  # the median run
                best.update(gateway=info["gateway"], route=route, clients=clients,
                            rps_all=[round(r["rps"]) for r in runs])
                rows.append(best)
                print(f"gateway {info['gateway']:>12} {route:>9} clients={clients:<3} p50={best['p50_ms']:.3f} ms "
                      f"p95={best['p95_ms']:.3f} ms {best['rps']:.0f} req/s (runs: {best['rps_all']}) server CPU "
                      f"{best['server_cpu_us']:.0f} us/req errors={best['errors']} load={best['load']:.2f}",
                      flush=True)
    finally:
        for server, info in servers:
            server.stdin.close()  # type: ignore[union-attr]
            tail = server.stdout.read()  # type: ignore[union-attr]
            server.wait(timeout=30)
            print(f"# {info['gateway']}: spans stored {json.loads(tail.strip().splitlines()[-1])['spans']}")
    model = _model_path(args.model)
    for clients in args.clients:
        d = direct(model, clients, min(args.seconds, 3.0))
        print(f"direct engine call   clients={clients:<3} p50={d['p50_ms']:.4f} ms p95={d['p95_ms']:.4f} ms "
              f"{d['rps']:.0f} calls/s", flush=True)
        for row in rows:
            if row["clients"] == clients:
                row["added_p50_ms"] = row["p50_ms"] - d["p50_ms"]
                print(f"  added latency p50, gateway {row['gateway']} {row['route']}: {row['added_p50_ms']:.3f} ms")
    return rows


# -- (b) TorchEngine batching -------------------------------------------------------------

def engine_run(args: argparse.Namespace) -> None:
    """Child process: tokens/s batched vs one at a time, torch on ``--threads`` threads."""
    import torch

    from tracerl.engines.base import SamplingParams
    from tracerl.engines.torch_engine import TorchEngine

    torch.set_num_threads(args.threads[0])
    model = _model_path(args.model)
    tok = _tokenizer(model)
    prompts = [list(tok.apply_chat_template([{"role": "user", "content": f"What is {i} + {3 * i % 17}?"}],
                                            add_generation_prompt=True, tokenize=True, return_dict=False))
               for i in range(args.requests)]
    out = {}
    for mode, batch in (("batched", 32), ("one_at_a_time", 1)):
        engine = TorchEngine(model, max_batch_size=batch)
        engine.generate_sync(prompts[0], SamplingParams(max_tokens=2))  # warm-up

        async def all_at_once(engine: Any = engine) -> list[Any]:
            return await asyncio.gather(*(engine.generate(p, SamplingParams(max_tokens=args.max_tokens, seed=i))
                                          for i, p in enumerate(prompts)))

        runs = []
        for _ in range(args.repeats):
            batches = engine.batches
            t = time.perf_counter()
            gens = asyncio.run(all_at_once())
            wall = time.perf_counter() - t
            tokens = sum(len(g.token_ids) for gs in gens for g in gs)
            runs.append({"tokens": tokens, "wall_s": wall, "tok_s": tokens / wall, "batches": engine.batches - batches})
        engine.shutdown()
        out[mode] = sorted(runs, key=lambda r: r["tok_s"])[len(runs) // 2]
    print(json.dumps(out))


def engine_part(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for threads in args.threads:
        cmd = [sys.executable, __file__, "_engine", "--threads", str(threads), "--requests", str(args.requests),
               "--max-tokens", str(args.max_tokens), "--repeats", str(args.repeats)]
        cmd += ["--model", args.model] if args.model else []
        res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
        b, s = res["batched"], res["one_at_a_time"]
        rows.append({"threads": threads, **{f"batched_{k}": v for k, v in b.items()},
                     **{f"single_{k}": v for k, v in s.items()}, "speedup": b["tok_s"] / s["tok_s"],
                     "load": os.getloadavg()[0]})
        print(f"TorchEngine torch_threads={threads}: {args.requests} concurrent requests x <= {args.max_tokens} tokens: "
              f"batched {b['tok_s']:.0f} tok/s ({b['tokens']} tokens, {b['batches']} batches, {b['wall_s']:.2f} s) vs "
              f"one at a time {s['tok_s']:.0f} tok/s ({s['tokens']} tokens, {s['wall_s']:.2f} s): "
              f"x{b['tok_s'] / s['tok_s']:.1f}  load={rows[-1]['load']:.2f}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", nargs="?", default="run", choices=["run", "_serve", "_loadgen", "_engine"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--part", choices=["all", "gateway", "engine"], default="all")
    parser.add_argument("--model", help="model directory (default: the bundled tiny model)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 32], help="concurrent clients, (a)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each load run, (a)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per setting; the median is reported")
    parser.add_argument("--loadgen", choices=["auto", "wrk", "python"], default="auto")
    parser.add_argument("--gateway-ref", nargs="*", help="git refs whose gateway package to serve, (a)")
    parser.add_argument("--routes", nargs="+", choices=sorted(ROUTES), default=["chat"],
                        help="the API each load run calls: chat completions and/or the Responses API, (a)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch intra-op threads, (b)")
    parser.add_argument("--requests", type=int, default=32, help="concurrent requests, (b)")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per request, (b)")
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "_serve":
        args.gateway_ref = args.gateway_ref[0] if args.gateway_ref else None
        serve(args)
    elif args.role == "_loadgen":
        args.clients = args.clients[0]
        loadgen(args)
    elif args.role == "_engine":
        engine_run(args)
    else:
        print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
              f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        if args.part in ("all", "gateway"):
            gateway_part(args)
        if args.part in ("all", "engine"):
            engine_part(args)


if __name__ == "__main__":
    main()
