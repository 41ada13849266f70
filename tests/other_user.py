"""Another user on the machine, for the tests of what such a user can plant or hold
(issue 34): commands run as ``nobody`` with ``setpriv`` (else ``su``), in a folder
both users can reach.

Only root can switch users, so these tests run where the suite runs as root (CI,
the development containers) and are skipped elsewhere with the reason.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

USER, GROUP = "nobody", "nogroup"


def _unavailable() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root, to run commands as a second user (nobody)"
    try:
        import grp
        import pwd

        pwd.getpwnam(USER)
        grp.getgrnam(GROUP)
    except (ImportError, KeyError):
        return f"no user {USER} / group {GROUP} on this machine"
    if not (shutil.which("setpriv") or shutil.which("su")):
        return "neither setpriv nor su is installed"
    return None


REASON = _unavailable()
needed = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def uid() -> int:
    import pwd

    return pwd.getpwnam(USER).pw_uid


def run(script: str, *, background: bool = False) -> subprocess.Popen[str] | str:
    """Runs the shell ``script`` as the other user; its output (it must succeed), or the
    process when ``background``."""
    if shutil.which("setpriv"):
        argv = ["setpriv", f"--reuid={USER}", f"--regid={GROUP}", "--clear-groups", "--",
                "/bin/sh", "-c", script]
    else:
        argv = ["su", USER, "-s", "/bin/sh", "-c", script]
    if background:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, cwd="/")
    proc = subprocess.run(argv, capture_output=True, text=True, cwd="/", timeout=60)
    assert proc.returncode == 0, f"as {USER}: {script}\n{proc.stdout}{proc.stderr}"
    return proc.stdout


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder every user may write (mode 1777, as /tmp), outside pytest's private
    temporary folders, which the other user cannot enter."""
    path = Path(tempfile.mkdtemp(prefix="opbench-shared-", dir="/tmp"))
    os.chmod(path, 0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
