"""/diagnostics for a node: diagnostic_updater when importable, else the same array.

On a full ROS 2 install diagnostic_updater is used (one ``Updater`` per node, one task
per ``add``), so the status looks exactly like any other driver's to
rqt_robot_monitor and the diagnostic aggregator. Where it is not importable (the PyPI
wheels), the same DiagnosticArray is published directly: status name
``"<node>: <task>"``, hardware_id, level and key/values. Callers decide *when* to
publish (``publish()``), so a 50 Hz node can do it in the slack after a tick rather
than on a timer that may collide with the tick.
"""

from __future__ import annotations

from collections.abc import Callable

from diagnostic_msgs.msg import DiagnosticArray

from wam_core.common.clock import wall_ns

from . import convert
from .qos import EVENTS

Build = Callable[[], tuple[int, str, list[tuple[str, object]]]]

try:  # a full ROS 2 install
    import diagnostic_updater as _du
except ImportError:  # PyPI wheels: no diagnostic_updater
    _du = None


class NodeDiagnostics:
    # A restarted node's first statuses can go out before DDS has matched it with the
    # harness; the harness keeps it stopped until it hears one. So right after
    # activation the node reports five times a second for STARTUP_S, then once a second:
    # once matched, the harness hears it within 0.2 s. (Matching took up to ~2 s in
    # `make faults REPEAT=20` here, so 2 s of start-up reporting was not always enough.)
    TIMER_S = 0.2
    STARTUP_S = 5.0

    def __init__(self, node, hardware_id: str = '', reports_as: str = ''):
        """``reports_as``: the node name the statuses carry instead of this node's own (an
        action-expert instance's standby node for a robot reports as that robot's
        ``action_expert`` once it serves it, so the robot's gate hears the role it depends
        on, not which process fills it); the hardware_id is then that name, qualified in
        this node's namespace. Published directly: the updater names statuses after the
        node itself."""
        self.node = node
        self.name = reports_as or node.get_name()
        if reports_as and not hardware_id:
            ns = node.get_namespace().rstrip('/')
            hardware_id = f'{ns}/{reports_as}'
        self.hardware_id = hardware_id or node.get_fully_qualified_name()
        self.tasks: list[tuple[str, Build]] = []
        self.uses_updater = _du is not None and not reports_as
        self._calls = 0
        if self.uses_updater:
            # We trigger updates ourselves; the updater's own timer is parked. One
            # updater per node: a second would declare its period parameter again.
            self._updater = _du.Updater(node, period=3600.0)
            self._updater.setHardwareID(self.hardware_id)
        else:
            self._pub = node.create_publisher(DiagnosticArray, '/diagnostics', EVENTS)

    def add(self, task: str, build: Build) -> None:
        """One status of this node: ``build()`` -> (level, message, [(key, value)])."""
        self.tasks.append((task, build))
        if self.uses_updater:
            self._updater.add(task, lambda stat, build=build: self._run(stat, build))

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

    @staticmethod
    def _run(stat, build: Build):
        level, message, values = build()
        stat.summary(level, message)
        for k, v in values:
            stat.add(str(k), convert.format_value(v))
        return stat

    def publish(self) -> None:
        """Report every task now."""
        if self.uses_updater:
            self._updater.force_update()
            return
        statuses = []
        for task, build in self.tasks:
            level, message, values = build()
            statuses.append(
                convert.diagnostic_status(
                    f'{self.name}: {task}', self.hardware_id, level, message, values
                )
            )
        self._pub.publish(convert.diagnostic_array(wall_ns(), statuses))
