"""Harness (first cut): watches the raw chunks; forwards nothing yet.

The harness issue grows this into the ExecuteTask server, planner, clamping gate and
diagnostics watchdog. Until that gate exists nothing reaches
/arm_controller/joint_trajectory: an unclamped chunk must never reach a robot.
"""
from __future__ import annotations

from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectory
from wam_util.executors import run_node


class HarnessNode(Node):
    def __init__(self, name: str = 'harness', **kwargs):
        super().__init__(name, **kwargs)
        self.create_subscription(JointTrajectory, '/action_expert/raw_chunk', self._on_chunk, 10)
        self.seen = 0

    def _on_chunk(self, msg: JointTrajectory) -> None:
        self.seen += 1


def main(args=None) -> None:
    run_node(HarnessNode, args)


if __name__ == '__main__':
    main()
