"""What tracerl's gateway costs per request next to the LiteLLM proxy, in front of one upstream.

* ``upstream``: a fake OpenAI-compatible server (asyncio, stdlib; uvloop when installed) that
  answers every request at once with the same bytes, a short reply with vLLM-style token ids
  and logprobs (so the gateway has tokens to record). The load straight against it is the floor.
* ``tracerl``: ``GatewayServer(UpstreamEngine(upstream), store)`` in chat passthrough, spans in
  a temporary SQLite file, each committed before the answer (which is the point of it).
* ``litellm``: the LiteLLM proxy (``litellm --config``, one worker) routing the model to the
  same upstream as an ``openai/`` model with ``api_base``; no database, telemetry off, the
  bundled cost map. Installed on first run into ``--litellm-venv`` (``pip install
  'litellm[proxy]'``), reused after. Both contestants check one Bearer key (the proxy will not
  start without a master key).

Each is its own process, and so is the load generator (asyncio, HTTP/1.1 keep-alive). Per
``--clients`` level it warms up, then sends ``--requests`` requests: latency p50/p95, req/s,
and CPU ms per request (user+system via psutil) of the target's process tree and of the
upstream's. Targets alternate (upstream, tracerl, litellm, upstream, ...) for ``--rounds``
rounds; each cell is the median over rounds. On few cores the load generator, the target and
the upstream share them: trust CPU ms/request more than req/s there.

    .venv/bin/python bench/gateway_vs_litellm.py            # --clients 1 32 --requests 2000 --rounds 3
    .venv/bin/python bench/gateway_vs_litellm.py --requests 500 --rounds 1 --targets tracerl
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODEL = "bench-model"
KEY = os.environ.setdefault("BENCH_API_KEY", "sk-" + os.urandom(32).hex())  # the children inherit it
BODY = {"model": MODEL, "max_tokens": 16, "messages": [
    {"role": "system", "content": "You are a careful math agent. Use the calculator tool when needed."},
    {"role": "user", "content": "What is 12 + 30? Think, then answer with the number only."}]}
IDS = [785, 4226, 374, 220, 19, 17, 13, 151645]
REPLY = {"id": "chatcmpl-bench", "object": "chat.completion", "created": 1700000000, "model": "upstream-model",
         "choices": [{"index": 0, "finish_reason": "stop", "token_ids": IDS,
                      "message": {"role": "assistant", "content": "The answer is 42."},
                      "logprobs": {"content": [{"token": f"t{i}", "logprob": -0.5, "bytes": [116],
                                                "top_logprobs": []} for i in IDS]}}],
         "usage": {"prompt_tokens": 48, "completion_tokens": len(IDS), "total_tokens": 48 + len(IDS)},
         "prompt_token_ids": list(range(151644, 151644 + 48))}
QUIET_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY_DISABLED": "True", "LITELLM_LOG": "ERROR",
             "DISABLE_ADMIN_UI": "True", "HF_HUB_OFFLINE": "1", "OPENAI_AGENTS_DISABLE_TRACING": "1",
             "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
Procs = dict[str, tuple[subprocess.Popen[str], str]]


def _loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _content_length(head: bytes) -> int:
    return next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                 if line.lower().startswith(b"content-length:")), 0)


class _Upstream(asyncio.Protocol):
    """HTTP/1.1 keep-alive; every request, whatever its path, gets the same 200 and JSON."""

    data = json.dumps(REPLY).encode()
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data)

    def connection_made(self, transport: Any) -> None:
        self.transport, self.buf = transport, b""

    def data_received(self, chunk: bytes) -> None:
        self.buf += chunk
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            size = end + 4 + _content_length(self.buf[:end])
            if len(self.buf) < size:
                return
            self.buf = self.buf[size:]
            self.transport.write(self.answer)


def serve_upstream() -> None:
    loop = _loop()
    server = loop.run_until_complete(loop.create_server(_Upstream, "127.0.0.1", 0, backlog=1024))
    print(json.dumps({"url": f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"}), flush=True)
    loop.run_until_complete(loop.run_in_executor(None, sys.stdin.read))  # until the parent closes stdin
    server.close()


def serve_gateway(upstream: str) -> None:
    from tracerl.core.store import SpanStore
    from tracerl.engines.upstream import UpstreamEngine
    from tracerl.gateway import GatewayServer

    engine = UpstreamEngine(upstream + "/v1", "upstream-model", model_name=MODEL)
    with tempfile.TemporaryDirectory() as tmp, SpanStore(Path(tmp) / "bench.db") as store, \
            GatewayServer(engine, store, api_key=KEY) as gw:
        print(json.dumps({"url": gw.url}), flush=True)
        sys.stdin.read()
        print(json.dumps({"spans": store.count()}), flush=True)


def loadgen(url: str, clients: int, requests: int, warmup: int) -> None:
    """Warm up, print ``ready``, wait for a line on stdin, send ``requests``; JSON out."""
    host, _, rest = url.removeprefix("http://").partition(":")
    port, _, path = rest.partition("/")
    body = json.dumps(BODY).encode()
    request = (f"POST /{path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
               f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    latencies: list[float] = []
    state = {"left": 0, "errors": 0}

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: bool) -> None:
        while state["left"] > 0:
            state["left"] -= 1
            t = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(_content_length(head))
            if record:
                latencies.append(time.perf_counter() - t)
                state["errors"] += head[9:12] != b"200"

    async def main() -> float:
        conns = [await asyncio.open_connection(host, int(port)) for _ in range(clients)]
        state["left"] = warmup
        await asyncio.gather(*(client(r, w, False) for r, w in conns))
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        state["left"] = requests
        start = time.perf_counter()
        await asyncio.gather(*(client(r, w, True) for r, w in conns))
        return time.perf_counter() - start

    elapsed = _loop().run_until_complete(main())
    lat = sorted(latencies)
    print(json.dumps({"requests": len(lat), "errors": state["errors"], "rps": len(lat) / elapsed,
                      "p50_ms": lat[len(lat) // 2] * 1e3, "p95_ms": lat[int(0.95 * len(lat))] * 1e3}), flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_s(pid: int) -> float:
    """user+system seconds of a process (all its threads) and its live descendants."""
    import psutil

    proc, total = psutil.Process(pid), 0.0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += sum(p.cpu_times()[:2])
    return total


def _wait_ready(url: str, proc: subprocess.Popen[str], timeout_s: float) -> None:
    """POST the bench body until it gets a 200 (the proxy imports and starts slowly)."""
    deadline, last = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited ({proc.returncode})")
        req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(BODY).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
        try:
            with urllib.request.urlopen(req, timeout=10):
                return  # a non-2xx status raises HTTPError, an OSError
        except OSError as exc:
            last = str(exc)
        time.sleep(0.5)
    raise RuntimeError(f"{url} was not ready after {timeout_s:.0f} s: {last}")


def ensure_litellm(venv: Path) -> str:
    """Create ``venv`` with ``litellm[proxy]`` unless it has the ``litellm`` command; its version."""
    python = venv / "bin" / "python"
    if not (venv / "bin" / "litellm").exists():
        print(f"# installing litellm[proxy] into {venv} (first run) ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "litellm[proxy]"], check=True)
    return subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
                          check=True, capture_output=True, text=True).stdout.strip()


def _start_litellm(venv: Path, upstream: str, port: int, tmp: Path) -> subprocess.Popen[str]:
    config = tmp / "litellm.yaml"
    config.write_text(json.dumps({  # JSON is YAML
        "model_list": [{"model_name": MODEL, "litellm_params": {
            "model": "openai/upstream-model", "api_base": upstream + "/v1", "api_key": "sk-upstream"}}],
        "litellm_settings": {"drop_params": True, "set_verbose": False},
        "general_settings": {"master_key": KEY, "disable_spend_logs": True}}))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "LITELLM_MASTER_KEY")}
    cmd = [str(venv / "bin" / "litellm"), "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
           "--num_workers", "1"]
    return subprocess.Popen(cmd, env={**env, **QUIET_ENV}, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=open(tmp / "litellm.log", "w"), text=True, cwd=tmp)  # noqa: SIM115


def start_targets(args: argparse.Namespace, tmp: Path, procs: Procs) -> None:
    me, env = [sys.executable, __file__], {**os.environ, **QUIET_ENV}
    up = subprocess.Popen([*me, "_upstream"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    procs["upstream"] = (up, upstream := json.loads(up.stdout.readline())["url"])  # type: ignore[union-attr]
    if "tracerl" in args.targets:
        gw = subprocess.Popen([*me, "_gateway", "--url", upstream], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env, cwd=ROOT)
        procs["tracerl"] = (gw, json.loads(gw.stdout.readline())["url"])  # type: ignore[union-attr]
    if "litellm" in args.targets:
        t, port = time.monotonic(), _free_port()
        procs["litellm"] = (ll := _start_litellm(args.litellm_venv, upstream, port, tmp), f"http://127.0.0.1:{port}")
        try:
            _wait_ready(procs["litellm"][1], ll, 180)
        except RuntimeError:
            print((tmp / "litellm.log").read_text()[-3000:], file=sys.stderr)
            raise
        print(f"# litellm proxy answered after {time.monotonic() - t:.1f} s", file=sys.stderr, flush=True)
    for proc, url in procs.values():
        _wait_ready(url, proc, 60)


def one_run(url: str, server_pid: int, upstream_pid: int, clients: int, requests: int) -> dict[str, Any]:
    lg = subprocess.Popen([sys.executable, __file__, "_loadgen", "--url", url + "/v1/chat/completions",
                           "--clients", str(clients), "--requests", str(requests), "--warmup",
                           str(max(200, 10 * clients))], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert lg.stdout is not None and lg.stdin is not None
    if lg.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the load generator against {url} failed in its warm-up")
    cpu, up_cpu = _cpu_s(server_pid), _cpu_s(upstream_pid)
    lg.stdin.write("go\n")
    lg.stdin.flush()
    res = json.loads(lg.stdout.readline())
    n = max(1, res["requests"])
    res["cpu_ms"] = (_cpu_s(server_pid) - cpu) / n * 1e3
    res["up_cpu_ms"] = (_cpu_s(upstream_pid) - up_cpu) / n * 1e3
    lg.wait(timeout=30)
    return res


def header(args: argparse.Namespace, litellm_version: str) -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "?")
    exe = os.path.relpath(sys.executable) if not os.path.relpath(sys.executable).startswith("..") else sys.executable
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    return (f"- command: `{shlex.join([exe, *sys.argv])}`\n- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n"
            f"- machine: nproc {len(os.sched_getaffinity(0))}, {cpu}; load average "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start\n"
            f"- python {platform.python_version()}; litellm[proxy] {litellm_version}; "
            f"tracerl commit {commit.strip() or '?'}\n"
            f"- {args.requests} requests per run after a warm-up; each cell the median of {args.rounds} rounds; "
            f"CPU = user+system of the process tree per request\n")


def table(results: dict[tuple[str, int], list[dict[str, Any]]], targets: list[str]) -> None:
    print("| target | clients | p50 ms | p95 ms | req/s | target CPU ms/req | upstream CPU ms/req | errors |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (name, clients), runs in sorted(results.items(), key=lambda kv: (kv[0][1], targets.index(kv[0][0]))):
        med = {k: statistics.median(r[k] for r in runs) for k in ("p50_ms", "p95_ms", "rps", "cpu_ms", "up_cpu_ms")}
        label = "upstream alone (floor)" if name == "upstream" else f"{name} -> upstream"
        up_cpu = f"{med['up_cpu_ms']:.3f}" if name != "upstream" else "(itself)"
        print(f"| {label} | {clients} | {med['p50_ms']:.2f} | {med['p95_ms']:.2f} | {med['rps']:.0f} "
              f"| {med['cpu_ms']:.3f} | {up_cpu} | {sum(r['errors'] for r in runs)} |")


def bench(args: argparse.Namespace) -> None:
    started = time.monotonic()
    args.litellm_venv = Path(args.litellm_venv)
    head = header(args, ensure_litellm(args.litellm_venv) if "litellm" in args.targets else "not run")
    procs: Procs = {}
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            start_targets(args, Path(tmp), procs)
            for rnd in range(args.rounds):
                for clients in args.clients:
                    for name in args.targets:
                        proc, url = procs[name]
                        res = one_run(url, proc.pid, procs["upstream"][0].pid, clients, args.requests)
                        results.setdefault((name, clients), []).append(res)
                        print(f"# round {rnd + 1} {name:>8} clients={clients:<3} p50={res['p50_ms']:.2f} ms "
                              f"{res['rps']:.0f} req/s cpu={res['cpu_ms']:.3f} ms/req errors={res['errors']}",
                              file=sys.stderr, flush=True)
        finally:
            for name, (proc, _) in procs.items():
                proc.stdin.close()  # type: ignore[union-attr]
                if name == "litellm":
                    proc.terminate()
                elif name == "tracerl":
                    notes.append(f"tracerl stored {json.loads(proc.stdout.readline())['spans']} spans")  # type: ignore[union-attr]
                proc.wait(timeout=30)
    print(head)
    table(results, args.targets)
    print(f"\n{'; '.join(notes) or 'tracerl not run'}; took {time.monotonic() - started:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", nargs="?", default="run", choices=["run", "_upstream", "_gateway", "_loadgen"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 32], help="concurrent keep-alive connections")
    parser.add_argument("--requests", type=int, default=2000, help="measured requests per run")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median is reported")
    parser.add_argument("--targets", nargs="+", choices=["upstream", "tracerl", "litellm"],
                        default=["upstream", "tracerl", "litellm"], help="the floor (upstream) always runs")
    parser.add_argument("--litellm-venv", default="/work/bench-venvs/litellm-proxy",
                        help="virtualenv for litellm[proxy], created on first run")
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=200, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "_upstream":
        serve_upstream()
    elif args.role == "_gateway":
        serve_gateway(args.url)
    elif args.role == "_loadgen":
        loadgen(args.url, args.clients[0], args.requests, args.warmup)
    else:
        args.targets = ["upstream", *(t for t in dict.fromkeys(args.targets) if t != "upstream")]
        bench(args)


if __name__ == "__main__":
    main()
