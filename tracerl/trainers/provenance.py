"""``code.diff`` in a run folder: what the code was, beside ``config.json``.

A run is reproducible from its config only with the code that ran it. When training starts
inside a git repository, the run folder keeps the commit and the tracked, uncommitted changes
(``git diff HEAD``: staged and unstaged), so ``git apply code.diff`` on that commit restores
them. Untracked files are never included, and the diff is never sent to a tracker: it may hold
secrets, and a run folder stays on the machine unless its owner moves it. Capped at
:data:`MAX_BYTES`; past that the file says how much was left out.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)
MAX_BYTES = 1 << 20


def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):  # no git, or a repository too slow to read
        return None
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None


def write_code_diff(folder: Path, cwd: Path | None = None, max_bytes: int = MAX_BYTES) -> Path | None:
    """Write ``folder/code.diff`` for the repository holding ``cwd`` (default: the working
    directory); None, and nothing written, outside a git repository."""
    cwd = cwd or Path.cwd()
    root = _git(cwd, "rev-parse", "--show-toplevel")
    if root is None:
        return None
    commit = (_git(cwd, "rev-parse", "HEAD") or "").strip()
    diff = _git(cwd, "diff", "HEAD", "--no-color", "--no-ext-diff", "--binary") if commit else ""
    if diff is None:
        log.warning("code.diff: git diff failed in %s; the run folder has no code.diff", root.strip())
        return None
    body = diff.encode()
    head = (f"# git repository {root.strip()} at commit {commit or '(no commit yet)'}: tracked changes not "
            "committed (git diff HEAD)\n")
    if not body:
        head += "# none: the run's code is that commit\n"
    elif len(body) > max_bytes:
        cut = body[:max_bytes].decode("utf-8", "ignore")
        body = (cut + f"\n# truncated: {len(body) - len(cut.encode())} more bytes left out (code_diff cap)\n").encode()
    path = folder / "code.diff"
    path.write_bytes(head.encode() + body)
    return path
