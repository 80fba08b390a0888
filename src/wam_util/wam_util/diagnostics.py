"""/diagnostics for a node: diagnostic_updater when importable, else the same array.

On a full ROS 2 install diagnostic_updater is used (``Updater`` + one task), so the
status looks exactly like any other driver's to rqt_robot_monitor and the
diagnostic aggregator. Where it is not importable (the PyPI wheels), the same
DiagnosticArray is published directly: status name ``"<node>: <task>"``,
hardware_id, level and key/values. Callers decide *when* to publish (``publish()``),
so a 50 Hz node can do it in the slack after a tick rather than on a timer that
may collide with the tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from diagnostic_msgs.msg import DiagnosticArray

from wam_core import ros_convert as rc

Build = Callable[[], tuple[int, str, list[tuple[str, object]]]]

try:  # a full ROS 2 install
    import diagnostic_updater as _du
except ImportError:  # PyPI wheels: no diagnostic_updater
    _du = None


class NodeDiagnostics:
    def __init__(self, node, task: str, build: Build, hardware_id: str = ''):
        self.node = node
        self.task = task
        self.build = build
        self.hardware_id = hardware_id or node.get_fully_qualified_name()
        self.uses_updater = _du is not None
        self._calls = 0
        if self.uses_updater:
            # We trigger updates ourselves; the updater's own timer is parked.
            self._updater = _du.Updater(node, period=3600.0)
            self._updater.setHardwareID(self.hardware_id)
            self._updater.add(task, self._run)
        else:
            self._pub = node.create_publisher(DiagnosticArray, '/diagnostics', 10)

    # A restarted node's first statuses can go out before DDS has matched it with the
    # harness; the harness keeps it stopped until it hears one. So right after
    # activation the node reports five times a second for STARTUP_S, then once a second.
    TIMER_S = 0.2
    STARTUP_S = 2.0

    def start(self) -> None:
        """Call on activation: the next STARTUP_S seconds count as start-up."""
        self._calls = 0

    def due(self) -> bool:
        """Call every TIMER_S: whether to publish now."""
        self._calls += 1
        return (
            self._calls <= self.STARTUP_S / self.TIMER_S
            or self._calls % round(1.0 / self.TIMER_S) == 0
        )

    def _run(self, stat):
        level, message, values = self.build()
        stat.summary(level, message)
        for k, v in values:
            stat.add(str(k), rc.format_value(v))
        return stat

    def publish(self) -> None:
        if self.uses_updater:
            self._updater.force_update()
            return
        level, message, values = self.build()
        status = rc.diagnostic_status(
            f'{self.node.get_name()}: {self.task}', self.hardware_id, level, message, values
        )
        self._pub.publish(rc.diagnostic_array(time.time_ns(), [status]))
