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
from typing import Callable, List, Tuple

from diagnostic_msgs.msg import DiagnosticArray

from wam_core import ros_convert as rc

Build = Callable[[], Tuple[int, str, List[Tuple[str, object]]]]

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
        if self.uses_updater:
            # We trigger updates ourselves; the updater's own timer is parked.
            self._updater = _du.Updater(node, period=3600.0)
            self._updater.setHardwareID(self.hardware_id)
            self._updater.add(task, self._run)
        else:
            self._pub = node.create_publisher(DiagnosticArray, '/diagnostics', 10)

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
        status = rc.diagnostic_status(f'{self.node.get_name()}: {self.task}', self.hardware_id,
                                      level, message, values)
        self._pub.publish(rc.diagnostic_array(time.time_ns(), [status]))
