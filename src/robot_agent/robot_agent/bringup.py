"""What a bring-up of the stack needs, once for the single robot and the fleet.

``BringUp`` owns rclpy's context and the executor, the node processes it starts (each
dies with this process: ``wam_core.common.process.dying_with_parent``, no
``preexec_fn``), a spin loop that notices a child's death, and a shutdown that stops the
children, releases the in-process experts, destroys every node and ends the context. A
start that fails half-way (a model that will not load, a bad parameter) leaves nothing
behind: ``started()`` runs the subclass's start-up and shuts down what exists on any
exception before re-raising it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException

from wam_core.common.process import dying_with_parent
from wam_core.serving.interpreter import (
    SHARED_PROCESS_SWITCH_INTERVAL_S,
    shorten_gil_switch_interval,
    thaw_heap,
)
from wam_util.executors import BackgroundSpinner, make_executor, spin_slice


def stop_processes(procs, timeout: float = 10.0) -> None:
    """SIGINT every child still running, then wait for each; kill what does not exit."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def close_nodes(executor, releasable, extra=(), observers: BackgroundSpinner | None = None):
    """After the children: stop the executors, release the in-process experts (their
    caches), destroy every node and end the rclpy context. The heap the nodes froze is
    thawed: a process that builds stack after stack (the tests) would otherwise keep
    every finished stack's cycles for good."""
    extra = [*extra, *(observers.close() if observers is not None else ())]
    nodes = list(executor.get_nodes())  # before shutdown: the EventsExecutor's empties it
    executor.shutdown()
    for n in releasable:
        if n is not None:
            n.release()
    for n in dict.fromkeys([*nodes, *extra]):  # once each (a robot is in both)
        if n is None:
            continue
        try:
            n.destroy_node()
        except Exception:
            pass
    rclpy.try_shutdown()
    thaw_heap()


class BringUp:
    name = 'stack'

    def __init__(self, ros_args: list[str]):
        self._ros_args = list(ros_args)
        self.children: dict[str, object] = {}  # key -> a Popen (or a preforked process)
        self.modules: dict[str, str] = {}  # key -> the node module it runs
        self.observers: BackgroundSpinner | None = None
        self._shut = False
        # in one process the ticks share the GIL with the encoder and every callback
        shorten_gil_switch_interval(SHARED_PROCESS_SWITCH_INTERVAL_S)
        rclpy.init(args=[self.name, *self._ros_args])
        self.executor = make_executor()

    def started(self, start: Callable[[], None]) -> None:
        """Run the start-up; on any failure, shut down what exists, then re-raise."""
        try:
            start()
        except BaseException:
            self.shutdown()
            raise

    @property
    def procs(self) -> list:
        """The node processes running now."""
        return list(self.children.values())

    def launch(self, key: str, module: str, args: list[str], spawn=None):
        """Start ``python -m module args`` as child ``key`` (``spawn(module, args, env)``
        instead, e.g. a preforked template); it dies with this process."""
        env = dict(os.environ, PYTHONUNBUFFERED='1')
        if spawn is not None:
            p = spawn(module, args, env)
        else:
            p = subprocess.Popen(dying_with_parent([sys.executable, '-m', module, *args]), env=env)
        self.children[key] = p
        self.modules[key] = module
        return p

    def kill(self, key: str, sig: int = signal.SIGKILL):
        """Signal child ``key`` (a fault drill) and forget it; the caller may wait on it."""
        p = self.children.pop(key)
        self.modules.pop(key, None)
        p.send_signal(sig)
        return p

    def spin_for(
        self, seconds: float, on_status=None, status_every: float = 1.0, until=None
    ) -> None:
        end = time.monotonic() + seconds
        next_status = time.monotonic() + status_every
        while time.monotonic() < end and not (until is not None and until()):
            if not rclpy.ok():
                raise KeyboardInterrupt  # SIGINT/SIGTERM went to rclpy's handler
            try:
                spin_slice(self.executor, min(0.1, max(end - time.monotonic(), 0.0)))
            except ExternalShutdownException:
                raise KeyboardInterrupt from None  # the context went down mid-slice
            if on_status and time.monotonic() >= next_status:
                next_status += status_every
                on_status(self)
            for key, p in self.children.items():
                if p.poll() is not None:
                    raise RuntimeError(
                        f'{key} ({self.modules.get(key, "?")}) exited with {p.returncode}'
                    )

    # what a subclass releases ---------------------------------------------------------
    def _releasable(self) -> list:
        """In-process experts to release (their caches) before their nodes go."""
        return []

    def _extra_nodes(self) -> list:
        """Nodes outside the executor to destroy."""
        return []

    def _after_shutdown(self) -> None:
        """What else to stop once the nodes are gone (a store's master)."""

    def shutdown(self) -> None:
        if self._shut:
            return
        self._shut = True
        stop_processes(self.procs)
        close_nodes(self.executor, self._releasable(), self._extra_nodes(), self.observers)
        self._after_shutdown()
