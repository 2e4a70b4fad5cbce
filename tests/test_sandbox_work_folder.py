"""The host trusts nothing a run leaves in its work folder. Each test is the attacker's case: the
code replaces the places its output could be read back from (``stdout``, ``stderr`` and ``.done``
in its folder, and wherever its fd 1 and 2 lead) with a symlink to a host secret, a FIFO or
``/dev/zero``, through run_python, run_shell and the HumanEval grader, with and without
bubblewrap. The secret never comes back, nothing blocks, nothing reads without bound, and the
run's temporary folder is removed whatever the code left in it."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from tracerl import tasks
from tracerl.core.types import Task
from tracerl.tasks import isolation
from tracerl.tasks.sandbox import Limits, SandboxResult, run_python, run_shell

BOUNDARIES = [pytest.param(True, id="bwrap", marks=pytest.mark.skipif(not isolation.available(), reason="no bubblewrap")),
              pytest.param(False, id="plain")]
SECRET = "tracerl-host-secret-7f3a"

# Replaces every name its output could be read back by with ``target``: a path to link to, or "fifo".
ATTACK = '''
import os
target = {target!r}
names = {{"stdout", "stderr", ".done"}}
for fd in (1, 2):
    try:
        names.add(os.readlink(f"/proc/self/fd/{{fd}}"))  # a file, under the old design: replace it too
    except OSError:
        pass
for name in sorted(names):
    try:
        os.unlink(name)
    except OSError:
        pass
    try:
        os.mkfifo(name) if target == "fifo" else os.symlink(target, name)
    except OSError:
        pass
print("attacked", {tag!r})
'''

SHELL_ATTACK = '''
for name in stdout stderr .done "$(readlink /proc/self/fd/1)" "$(readlink /proc/self/fd/2)"; do
    rm -f -- "$name" 2>/dev/null
    if [ "$TARGET" = fifo ]; then mkfifo -- "$name"; else ln -s -- "$TARGET" "$name"; fi 2>/dev/null
done
echo attacked
'''


@pytest.fixture
def secret(tmp_path: Path) -> str:
    """A host file the run must never read out: 0600, in a 0700 folder hidden from the sandbox."""
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    path = hidden / "secret.txt"
    path.write_text(SECRET + "\n")
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the sandbox makes its temporary folders in this test (empty again afterwards)."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def within(seconds: float, call: Any) -> Any:
    """``call()``, failing the test (not hanging it) when it has not returned in ``seconds``."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert out, f"still running after {seconds} s (blocked on something the run left behind)"
    return out[0]


def clean(result: SandboxResult) -> None:
    assert SECRET not in result.stdout + result.stderr + result.reason


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("kind", ["secret", "fifo", "/dev/zero"])
def test_run_python_reads_its_output_from_pipes_not_from_what_the_code_left(boundary, kind, secret, scratch):
    target = secret if kind == "secret" else kind
    limits = Limits(timeout_s=5.0, memory_mb=256, boundary=boundary)
    result = within(20, lambda: run_python(ATTACK.format(target=target, tag=kind), limits))
    clean(result)
    assert result.ok and result.stdout == f"attacked {kind}\n", result.reason
    assert os.listdir(scratch) == []
    assert Path(secret).read_text() == SECRET + "\n"  # nor written through the links


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("kind", ["secret", "fifo", "/dev/zero"])
def test_run_shell_reads_its_output_from_a_pipe_not_from_what_the_script_left(boundary, kind, secret, scratch, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    target = secret if kind == "secret" else kind
    limits = Limits(timeout_s=5.0, memory_mb=256, boundary=boundary)
    result = within(20, lambda: run_shell(SHELL_ATTACK, work, limits, env={"TARGET": target}))
    clean(result)
    assert result.ok and result.stdout == "attacked\n", result.reason
    assert os.listdir(scratch) == []


@pytest.mark.parametrize("kind", ["secret", "fifo", "/dev/zero"])
def test_a_humaneval_reply_that_attacks_the_host_scores_zero_and_returns(kind, secret, scratch):
    spec = tasks.get("humaneval")
    task = Task(id="t", data={"prompt": "def f(x):\n    \"\"\"Double x.\"\"\"\n", "test": "def check(c):\n    assert c(2) == 4\n",
                              "entry_point": "f"}, dataset="humaneval")
    target = secret if kind == "secret" else kind
    reply = f"```python\n{ATTACK.format(target=target, tag=str(scratch))}\ndef f(x):\n    return x\n```"
    result = within(60, lambda: spec.source.grade(task, reply))
    clean(result)
    assert not result.ok and spec.reward(task, reply) == 0.0
    assert os.listdir(scratch) == []


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_output_floods_stop_at_the_cap_through_the_pipes(boundary, scratch):
    limits = Limits(timeout_s=10.0, memory_mb=256, output_bytes=1_000_000, boundary=boundary)
    for stream in ("sys.stdout", "sys.stderr"):
        flood = run_python(f"import sys\nwhile True:\n    {stream}.write('x' * 65536)\n", limits)
        assert not flood.ok and flood.reason == "output limit exceeded (1000000 bytes)" and flood.seconds < 8
        assert len(flood.stdout) <= 4000 and len(flood.stderr) <= 4000
    shell = run_shell("yes xxxxxxxxxxxxxxxx", scratch, limits)
    assert not shell.ok and shell.reason == "output limit exceeded (1000000 bytes)" and len(shell.stdout) <= 4000


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_the_temporary_folder_goes_whatever_the_code_left_in_it(boundary, scratch, tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "canary").write_text("still here")
    code = f'''
import os
os.mkfifo("fifo")
os.symlink({str(keep)!r}, "link")  # removing the folder must not follow it
os.makedirs("locked/inner")
open("locked/inner/file", "w").close()
os.chmod("locked/inner", 0o500)
os.chmod("locked", 0)
os.mkdir("deep")
os.chdir("deep")
for _ in range(1500):  # deeper than Python's recursion limit
    os.mkdir("d")
    os.chdir("d")
'''
    result = within(30, lambda: run_python(code, Limits(timeout_s=10.0, memory_mb=256, boundary=boundary)))
    assert result.ok, result.reason
    assert os.listdir(scratch) == []
    assert (keep / "canary").read_text() == "still here"


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_an_early_exit_still_fails_and_a_full_run_passes(boundary):
    limits = Limits(timeout_s=5.0, memory_mb=256, boundary=boundary)
    for early in ("import sys\nsys.exit(0)\n", "import os\nos._exit(0)\n", "import os\nos.close(1)\nos.close(2)\nos._exit(0)\n"):
        result = run_python(early, limits)
        assert not result.ok and result.reason.startswith("exited before the end"), early
    # closing its outputs does not stop the run being timed, nor a late end passing
    late = run_python("import os, time\nos.close(1)\nos.close(2)\ntime.sleep(1)\n", limits)
    assert late.ok, late.reason
    hung = run_python("import os, time\nos.close(1)\nos.close(2)\ntime.sleep(60)\n", Limits(timeout_s=1.0, boundary=boundary))
    assert not hung.ok and hung.reason.startswith("timeout") and hung.seconds < 5


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can mount on the host")
def test_a_mount_left_in_the_temporary_folder_is_detached_not_emptied(scratch, tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "canary").write_text("still here")
    # without bubblewrap or a network namespace a root caller's child is root on the host
    code = f'''
import ctypes, ctypes.util, os
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
os.mkdir("bind")
if libc.mount({os.fsencode(keep)!r}, b"bind", None, 4096, None) != 0:  # MS_BIND
    raise SystemExit("no mount: " + os.strerror(ctypes.get_errno()))
'''
    result = run_python(code, Limits(timeout_s=10.0, boundary=False, netns=False))
    if not result.ok:
        pytest.skip(f"this machine refuses the mount: {result.reason}")
    assert os.listdir(scratch) == []
    assert (keep / "canary").read_text() == "still here"


@pytest.mark.parametrize("shared", ["/tmp", "/", "~", "."])
def test_a_shared_folder_is_never_a_run_shell_work_folder(shared):
    """Under the boundary a work folder is handed to the sandbox's user, all of it: a shared one
    (here the test once passed /tmp, which re-owned the machine's /tmp) is refused in one line."""
    folder = Path(shared).expanduser()
    before = folder.stat().st_uid
    with pytest.raises(ValueError, match="is a shared folder, not a run's own"):
        run_shell("true", folder)
    assert folder.stat().st_uid == before
