"""A Ray cluster of two nodes on 127.0.0.1 only, in namespaces of its own, for the tests.

Ray's multi-node mode replaces 127.0.0.1 by the address other machines reach this one by
(``services.resolve_ip_for_localhost``) and listens there; the tests' rule is that nothing
listens or connects beyond loopback. In a network namespace whose only interface is loopback,
that address *is* 127.0.0.1, so a head and a second node (two raylets, as on two machines) run
there unchanged. A PID namespace ends every process the cluster started once this script, its
PID 1, exits, so a failed or timed-out test leaves no Ray behind, and ``ray stop`` here sees only
this cluster. The cluster uses token authentication with a token of its own (Ray would
otherwise pick up a user's ``~/.ray/auth_token``).

The test process stays outside: it runs :func:`run_on_cluster`, which runs this file as
``unshare --net --pid --fork --mount-proc python ray_loopback.py SPEC.json``; the commands in
SPEC (``tracerl train ...``) run inside, one after another, and leave their run folders and logs
on the shared filesystem for the test to read.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

RAY = str(Path(sys.executable).parent / "ray")
PORT = 6379  # the namespace's own loopback: no other cluster can hold it


@dataclass
class Finished:
    rc: int
    log: Path

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _unshare(inner: list[str]) -> list[str]:
    mapped = [] if os.geteuid() == 0 else ["--map-root-user"]
    return ["unshare", *mapped, "--net", "--pid", "--fork", "--mount-proc", *inner]


def unavailable() -> str | None:
    """Why this machine cannot run the cluster (a reason to skip), or None."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    if not Path(RAY).exists():
        return "ray is not installed"
    done = subprocess.run(_unshare(["true"]), capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        return f"cannot create network and PID namespaces here: {done.stderr.strip()[:200]}"
    return None


def run_on_cluster(commands: list[tuple[list[str], dict[str, str]]], folder: Path, *,
                   cluster_env: dict[str, str] | None = None, timeout_s: float = 600) -> tuple[list[Finished], str]:
    """Runs each (argv, extra env) on a fresh two-node cluster; returns how each ended and the
    cluster's own log. ``argv`` may name ``{address}``, the head's address. Ray's workers get the
    environment of their node's ``ray start``, not the driver's: ``cluster_env`` is theirs."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"commands": [{"argv": argv, "env": env, "log": str(folder / f"command{i}.log")}
                         for i, (argv, env) in enumerate(commands)],
            "result": str(folder / "result.json"), "log": str(folder / "cluster.log"), "env": cluster_env or {}}
    (folder / "spec.json").write_text(json.dumps(spec))
    # on a timeout the namespace's processes go with its PID 1; what finished is in result.json
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(_unshare([sys.executable, __file__, str(folder / "spec.json")]), timeout=timeout_s,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cluster_log = Path(spec["log"]).read_text(errors="replace") if Path(spec["log"]).exists() else ""
    rcs = json.loads(Path(spec["result"]).read_text()) if Path(spec["result"]).exists() else []
    return [Finished(rc, Path(c["log"])) for rc, c in zip(rcs, spec["commands"], strict=False)], cluster_log


# ---- inside the namespaces ----

def _loopback_up() -> None:
    """``ip link set lo up`` without iproute2: a new network namespace starts with lo down."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, siocgifflags, request)[:18])[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH", b"lo", flags | iff_up))


def _start(env: dict[str, str], temp: str, log) -> None:
    common = ["--num-cpus=1", "--object-store-memory=80000000", "--disable-usage-stats"]
    head = [RAY, "start", "--head", f"--port={PORT}", "--node-ip-address=127.0.0.1", "--include-dashboard=false",
            f"--temp-dir={temp}", *common]
    subprocess.run(head, env=env, check=True, stdout=log, stderr=log, timeout=120)
    subprocess.run([RAY, "start", f"--address=127.0.0.1:{PORT}", *common], env=env, check=True, stdout=log,
                   stderr=log, timeout=120)
    probe = ("import ray, time\nray.init(address='auto', log_to_driver=False)\n"
             "while sum(n['Alive'] for n in ray.nodes()) < 2: time.sleep(0.2)\n"
             "print('nodes alive:', sum(n['Alive'] for n in ray.nodes()))\n")
    subprocess.run([sys.executable, "-c", probe], env={**env, "RAY_ADDRESS": f"127.0.0.1:{PORT}"}, check=True,
                   stdout=log, stderr=log, timeout=120)


def _inside(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    _loopback_up()
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay short
    token = Path(temp) / "token"
    token.write_text(secrets.token_hex(32))
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), **spec["env"]}
    rcs: list[int] = []
    with open(spec["log"], "w") as log:
        try:
            t0 = time.monotonic()
            _start(env, temp, log)
            print(f"cluster up in {time.monotonic() - t0:.1f} s", file=log, flush=True)
            for command in spec["commands"]:
                argv = [a.replace("{address}", f"127.0.0.1:{PORT}") for a in command["argv"]]
                with open(command["log"], "w") as out:
                    rcs.append(subprocess.run(argv, env={**env, **command["env"]}, stdout=out, stderr=out,
                                              stdin=subprocess.DEVNULL).returncode)
                Path(spec["result"]).write_text(json.dumps(rcs))
        finally:
            subprocess.run([RAY, "stop", "--force"], env=env, stdout=log, stderr=log, timeout=60)
            shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    _inside(sys.argv[1])
