"""--ray-address where no Ray cluster answers: one line within ray_connect_timeout_s, not Ray's
retries for good (``ray.init`` logs "Failed to connect to GCS ... within 5 seconds" and tries again).

The runs set ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` so that Ray dials 127.0.0.1 as given: in its
multi-node mode (Linux's default) it would dial this machine's outward address instead."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("ray")

ENV = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def test_a_ray_address_where_nothing_listens_is_one_line(tmp_path):
    with socket.socket() as held:
        # bound for the whole test and never listening: a connect to it is refused, and no other
        # process can start listening on the port meanwhile
        held.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{held.getsockname()[1]}"
        argv = [sys.executable, "-m", "tracerl", "train", "calculator", "--rollout-workers", "2", "--ray-address",
                address, "--steps", "1", "--eval-size", "0", "--quiet", "--output", str(tmp_path / "run")]
        done = subprocess.run(argv, capture_output=True, text=True, env=ENV, timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"tracerl: error: --ray-address {address}: no Ray cluster there (nothing answered: Connection refused); start one on that "
        "machine with `ray start --head --port "
        f"{address.rsplit(':', 1)[1]}` (docs/scale.md), or pass the address `ray start --head` printed"]
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "run" / "run.json").exists()  # checked before the run starts: no run to list


def test_a_ray_address_that_never_answers_gives_up_at_the_connect_timeout():
    with socket.socket() as server, socket.socket() as first:
        # a backlog of one, filled: Linux drops the next SYN, so a connect hangs as to a host that is down
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        first.connect(server.getsockname())
        address = f"127.0.0.1:{server.getsockname()[1]}"
        probe = ("import time\n"
                 "from tracerl.core.errors import ConfigError\n"
                 "from tracerl.trainers.ray_rollouts import check_address\n"
                 "started = time.monotonic()\n"
                 f"try:\n    check_address({address!r}, 2.0)\n"
                 "except ConfigError as exc:\n    print(exc)\n"
                 "print(time.monotonic() - started)\n")
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    said, took = done.stdout.strip().splitlines()
    assert said.startswith(f"--ray-address {address}: no Ray cluster there (nothing answered within 2 s); start")
    assert 2.0 <= float(took) < 10.0  # the bound, not Ray's minutes
