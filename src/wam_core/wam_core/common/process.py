"""Child processes the stack starts: they never outlive the process that started them.

A child asks the kernel for a signal when its parent dies (``PR_SET_PDEATHSIG``), even by
kill -9, so no node or store process is left orphaned. It must ask from inside the
child, and not from a ``preexec_fn``: Python's documentation calls that unsafe in a
process with threads (the fork copies locks other threads hold, and code run between
fork and exec can deadlock on them), and every bring-up here has threads. So a child is
started through a trampoline (``dying_with_parent``): ``python -m
wam_core.common.process`` arms the signal, checks that the parent it was started for is
still its parent (else the parent died before the signal was armed), and ``exec``s the
real command; the signal survives the exec.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In this (child) process: get ``sig`` when the parent dies, even by kill -9."""
    ctypes.CDLL('libc.so.6', use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


def dying_with_parent(argv: list[str], sig: int = signal.SIGTERM) -> list[str]:
    """The command line that runs ``argv`` as a child that gets ``sig`` when this process
    dies (for ``subprocess.Popen``, with no ``preexec_fn``)."""
    return [
        sys.executable,
        '-m',
        'wam_core.common.process',
        '--parent',
        str(os.getpid()),
        '--signal',
        str(int(sig)),
        '--',
        *argv,
    ]


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


def _trampoline(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='python -m wam_core.common.process')
    ap.add_argument('--parent', type=int, required=True)
    ap.add_argument('--signal', type=int, default=int(signal.SIGTERM))
    ap.add_argument('command', nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ['--'] else args.command
    if not command:
        ap.error('no command to run')
    die_with_parent(args.signal)
    if os.getppid() != args.parent:  # the parent died before the signal was armed
        return 1
    os.execvp(command[0], command)
    return 127  # not reached: exec replaced this process


if __name__ == '__main__':
    sys.exit(_trampoline())
