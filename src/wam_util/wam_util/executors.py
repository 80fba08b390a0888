"""Executors and process entry points.

rclpy's EventsExecutor costs far less CPU per callback than the wait-set
executors, which matters on 2 cores. In these wheels its ``spin()`` neither fires
timers nor returns on SIGINT, so every loop here spins in short
``spin_until_future_complete`` slices, which do both.

Its timeout alone does not end a slice: the events queue returns only once it finds
itself empty after the deadline, so a process that falls behind (callbacks arriving
faster than it runs them: a fleet's simulated robots on a full host) stayed in one
slice for good, and nothing between slices ran: no stop flag, no time-out, no
status line. ``spin_slice`` ends the slice itself: a thread kept beside the spinning
one completes the slice's future at its deadline.
"""

from __future__ import annotations

import signal
import threading
import time

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.signals import SignalHandlerOptions
from rclpy.task import Future

from wam_core.common.params import ConfigError
from wam_core.serving.interpreter import freeze_heap

SLICE_S = 0.1


def make_executor():
    try:
        from rclpy.experimental import EventsExecutor

        return EventsExecutor()
    except ImportError:
        return SingleThreadedExecutor()


def spin_slice(executor, seconds: float = SLICE_S) -> None:
    """Run callbacks for ``seconds`` (or until the one under way at the end returns)."""
    end = Future()
    ender = _ender()
    ender.arm(end, time.monotonic() + seconds)
    try:
        executor.spin_until_future_complete(end, timeout_sec=seconds)
    except ExternalShutdownException:
        raise
    except Exception:
        if rclpy.ok():
            raise
        # a callback that ran after a signal shut the context down (a publish on it
        # fails): the process is stopping, not broken
        raise ExternalShutdownException() from None
    finally:
        ender.disarm()


class _SliceEnder(threading.Thread):
    """Completes the slice's future at its deadline: one per spinning thread, kept (a
    thread started per slice cost 120 us of CPU, ten times a second in every process)."""

    def __init__(self):
        super().__init__(name='slice_ender', daemon=True)
        self._cv = threading.Condition()
        self._slice: tuple[Future, float] | None = None

    def arm(self, future: Future, deadline: float) -> None:
        with self._cv:
            self._slice = (future, deadline)
            self._cv.notify()

    def disarm(self) -> None:
        with self._cv:
            self._slice = None

    def run(self) -> None:
        while True:
            with self._cv:
                if self._slice is None:
                    self._cv.wait()
                    continue
                future, deadline = self._slice
                left = deadline - time.monotonic()
                if left > 0:
                    self._cv.wait(left)
                    continue
                self._slice = None
            if not future.done():
                future.set_result(None)  # its done callback stops the executor's queue


_enders = threading.local()


def _ender() -> _SliceEnder:
    ender = getattr(_enders, 'ender', None)
    if ender is None:
        ender = _enders.ender = _SliceEnder()
        ender.start()
    return ender


def spin_until_shutdown(executor, stop: threading.Event | None = None) -> None:
    try:
        while rclpy.ok() and not (stop is not None and stop.is_set()):
            spin_slice(executor)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass


class BackgroundSpinner:
    """Nodes spun on their own wait-set executor in a daemon thread.

    For observers that must see messages as an outside process would: on the main
    executor their callbacks wait behind every queued callback of the nodes under
    test, and only a wait-set executor hands a callback the middleware's receipt time
    (``MessageInfo``; the EventsExecutor of these wheels cannot)."""

    def __init__(self, nodes=(), name: str = 'observers'):
        self.executor = SingleThreadedExecutor()
        for n in nodes:
            self.executor.add_node(n)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=spin_until_shutdown, args=(self.executor, self._stop), name=name, daemon=True
        )
        self._thread.start()

    def close(self) -> list:
        """Stop spinning; the nodes it spun (for the caller to destroy)."""
        self._stop.set()
        self._thread.join(timeout=2 * SLICE_S + 1.0)
        nodes = list(self.executor.get_nodes())
        self.executor.shutdown()
        return nodes


def _stop_on_signals() -> threading.Event:
    """SIGINT/SIGTERM only set a flag that the spin loop checks between slices, so a
    signal never lands as an exception inside a callback (e.g. mid-forward-pass)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def bring_up(node, transitions=('configure', 'activate')) -> None:
    """configure + activate a lifecycle node (what a lifecycle manager would do), or the
    ``transitions`` named; SystemExit naming the one that failed."""
    for name in transitions:
        if getattr(node, f'trigger_{name}')() != TransitionCallbackReturn.SUCCESS:
            raise SystemExit(f'{node.get_name()}: {name} failed, see the log above')


def run_node(node_factory, args=None, lifecycle: bool = False, hosted=None) -> None:
    """Process entry point: init, bring a lifecycle node up unless its ``autostart``
    parameter is false (a launch file or lifecycle manager drives it), spin, clean up.
    A node whose parameters are invalid exits with status 2 and the reason. ``hosted``:
    the node brings up nodes of its own (an action-expert instance): ``hosted(node)``
    starts them and returns them, to spin beside it and destroy after its release."""
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = _stop_on_signals()
    try:
        node = node_factory()
    except ConfigError as exc:
        rclpy.logging.get_logger('wam').fatal(f'invalid parameters: {exc}')
        rclpy.try_shutdown()
        raise SystemExit(2) from None
    executor = make_executor()
    executor.add_node(node)
    others = []
    try:
        # a node whose autostart parameter is invalid still comes up, to fail configure
        # with the reason
        autostart = not node.has_parameter('autostart') or node.get_parameter('autostart').value
        if lifecycle and autostart:
            bring_up(node)
        if hosted is not None:
            others = list(hosted(node))
            for other in others:
                executor.add_node(other)
        freeze_heap()  # what start-up built stays: later collections need not walk it
        spin_until_shutdown(executor, stop)
    finally:
        # an active managed node leaves as a lifecycle manager would take it down:
        # deactivated first (the action expert brakes its robot to a hold), then released
        if lifecycle:
            try:
                deactivate_if_active(node)
            except Exception as exc:  # the rest of the cleanup still runs
                rclpy.logging.get_logger('wam').error(f'deactivate on the way out: {exc}')
        release = getattr(node, 'release', None)
        if release is not None:
            release()
        executor.shutdown()
        for other in others:
            other.destroy_node()
        node.destroy_node()
        rclpy.try_shutdown()
        # Done: a second Ctrl-C (the terminal's, after launch's own SIGINT) must not end
        # the process by the signal while the interpreter finalizes, which puts SIGINT
        # back to its default action for handlers of ours (not for an ignored signal):
        # launch would report "process has died [exit code -2]".
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


def deactivate_if_active(node) -> bool:
    """Deactivate a lifecycle node that is active; whether it was."""
    try:
        _, label = node._state_machine.current_state
    except AttributeError:  # not a lifecycle node
        return False
    if label != 'active':
        return False
    node.trigger_deactivate()
    return True
