"""Node processes forked from one pre-loaded template: a fleet's memory per robot.

Every expert or harness process imports rclpy, torch and transformers before it does
anything: ~210 MB of private memory each, twice per robot. ``Preforker`` starts Python's
multiprocessing *forkserver* with those imports done once (``robot_agent.preload``:
rclpy, torch, transformers and the node modules, then ``gc.freeze()`` so the collector
does not touch, and so copy, the imported objects), and forks each node process from
it: the imported code and data stay shared copy-on-write. A forked node then runs
exactly what ``python -m <module>`` runs (the module's ``main()`` with the same ROS
arguments), in a fresh process with its own rclpy context; it dies with the
forkserver, which dies with the process that started it.

``PreforkedProcess`` answers as much of ``subprocess.Popen`` as the bring-ups use
(``pid``, ``args``, ``poll``, ``wait``, ``send_signal``, ``kill``, ``returncode``).
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import signal
import subprocess
import sys

from wam_core.common.process import die_with_parent

# imported once in the template; a node's own module is imported there too, so its
# import cost is paid once for every robot
PRELOAD = [
    'robot_agent.preload',
]


def _run_node(module: str, argv: list[str], env: dict[str, str]) -> None:
    """In the forked child: become ``python -m module argv...``."""
    die_with_parent()  # the forkserver's child: dies with it
    os.environ.clear()  # exactly the requester's environment, not the template's
    os.environ.update(env)
    sys.argv = [module, *argv]
    importlib.import_module(module).main()


class PreforkedProcess:
    def __init__(self, proc: mp.Process, args: list[str]):
        self._proc = proc
        self.args = args  # as Popen.args: [python, -m, module, ...]

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode

    def poll(self) -> int | None:
        return self._proc.exitcode if not self._proc.is_alive() else None

    def wait(self, timeout: float | None = None) -> int:
        self._proc.join(timeout)
        if self._proc.is_alive():
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self._proc.exitcode

    def send_signal(self, sig: int) -> None:
        if self._proc.is_alive():
            os.kill(self._proc.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Preforker:
    def __init__(self, preload: list[str] | None = None):
        self._ctx = mp.get_context('forkserver')
        self._ctx.set_forkserver_preload(list(preload or PRELOAD))

    def start(self, module: str, argv: list[str], env: dict[str, str]) -> PreforkedProcess:
        # daemon: multiprocessing ends it at this process's exit, even without a shutdown
        proc = self._ctx.Process(
            target=_run_node, args=(module, argv, env), name=module, daemon=True
        )
        proc.start()
        return PreforkedProcess(proc, [sys.executable, '-m', module, *argv])

    @staticmethod
    def server_pid() -> int | None:
        """The template process (its memory is the fleet's too)."""
        from multiprocessing import forkserver

        return getattr(forkserver._forkserver, '_forkserver_pid', None)
