"""Harness: the clamping gate with the safety stop, the only road to the robot.

Nothing else runs in this node's process: the task manager (the LLM client, MiniLM,
planning) is its own node, ``harness_node.task_node``, in its own process in the
multi-process stack, the fleet and the launch files, so a native crash or a long GIL
hold there can neither take down nor delay the gate. It reaches the gate through
``harness/hold`` (std_srvs/Trigger) when a task is canceled.

The node reads its parameters (``harness`` in config/wam.yaml), publishes the robot's
URDF on ``robot_description`` (latched) and reports on /diagnostics once a second, with
its typed status on ~/gate_status.
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


class HarnessNode(Node):
    def __init__(self, name: str = 'harness', **kwargs):
        super().__init__(name, **kwargs)
        self.cfg = NodeParams(self, HarnessParams).read()  # ConfigError names a bad parameter
        self.diagnostics = NodeDiagnostics(self)
        self.gate = SafetyGate(self, self.cfg, self.diagnostics)
        self.create_timer(1.0, self.diagnostics.publish)
        self.metrics = NodeMetrics(self, self.cfg.metrics_port)
        self.metrics.latency('safety_stop', self.gate.stop_latency_ms, 'trigger -> hold sent, s')
        self.metrics.latency('clamp', self.gate.clamp_ms, 'clamping a chunk, s')
        self.metrics.status('safety_gate', self.gate.status)
        self.metrics.start()
        # the robot's URDF, latched, as robot_state_publisher publishes it (for rviz,
        # MoveIt, or anyone checking which arm this stack serves)
        self._description = self.create_publisher(String, 'robot_description', qos.LATCHED)
        self._description.publish(String(data=self.cfg.robot.description().urdf))

    def destroy_node(self):
        self.metrics.stop()
        return super().destroy_node()


def main(args=None) -> None:
    run_node(HarnessNode, args)


if __name__ == '__main__':
    main()
