"""Child processes the stack starts: they never outlive the process that started them."""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In a child (a ``preexec_fn``, or right after a fork): get ``sig`` when the parent
    dies, even by kill -9, so no node or store process is left orphaned."""
    ctypes.CDLL('libc.so.6', use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


def terminate(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM a child still running, wait for it, SIGKILL it if it does not exit."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port(host: str = '127.0.0.1') -> int:
    """A TCP port nothing listens on now, for a child server to bind."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
