"""Harness: the clamping gate with the safety stop, and the task manager, in one node.

The two jobs are separate classes (``safety_gate``, ``task_manager``) with their own
callback groups; the node only reads its parameters (``harness`` in config/wam.yaml)
and reports both on /diagnostics once a second, with their typed statuses on
~/gate_status and ~/task_status.
"""

from __future__ import annotations

from rclpy.node import Node
from std_msgs.msg import String

from wam_core.common.config import HarnessParams
from wam_util import qos
from wam_util.diagnostics import NodeDiagnostics
from wam_util.executors import run_node
from wam_util.metrics import NodeMetrics
from wam_util.params import NodeParams

from .safety_gate import SafetyGate
from .task_manager import TaskManager


class HarnessNode(Node):
    def __init__(self, name: str = 'harness', **kwargs):
        super().__init__(name, **kwargs)
        self.cfg = NodeParams(self, HarnessParams).read()  # ConfigError names a bad parameter
        self.diagnostics = NodeDiagnostics(self)
        self.gate = SafetyGate(self, self.cfg, self.diagnostics)
        self.tasks = TaskManager(self, self.cfg, self.diagnostics, hold=self.gate.hold)
        self.create_timer(1.0, self.diagnostics.publish)
        self.metrics = NodeMetrics(self, self.cfg.metrics_port)
        self.metrics.latency('plan', self.tasks.plan_ms, 'instruction -> validated plan, s')
        self.metrics.latency('safety_stop', self.gate.stop_latency_ms, 'trigger -> hold sent, s')
        self.metrics.latency('clamp', self.gate.clamp_ms, 'clamping a chunk, s')
        self.metrics.status('safety_gate', self.gate.status)
        self.metrics.status('task_manager', self.tasks.status)
        self.metrics.start()
        # the robot's URDF, latched, as robot_state_publisher publishes it (for rviz,
        # MoveIt, or anyone checking which arm this stack serves)
        self._description = self.create_publisher(String, 'robot_description', qos.LATCHED)
        self._description.publish(String(data=self.cfg.robot.description().urdf))

    def destroy_node(self):
        self.metrics.stop()
        self.tasks.close()
        return super().destroy_node()


def main(args=None) -> None:
    run_node(HarnessNode, args)


if __name__ == '__main__':
    main()
