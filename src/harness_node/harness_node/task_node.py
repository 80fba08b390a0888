"""The task manager's node: ExecuteTask goals and instructions -> a plan -> subtasks.

Its own node (``task_manager`` in config/wam.yaml) and, in the multi-process stack, the
fleet and the launch files, its own process: the LLM client and MiniLM (torch) live
here, away from the clamping gate (a fleet's robots share one such process:
``harness_node.task_managers``). It keeps the harness's interface, under the robot's
namespace: the ``harness/execute_task`` action, ``harness/active_subtask`` (latched),
``instruction``, and its typed status on ``harness/task_status``. A canceled task
holds the robot through the gate's ``harness/hold`` service.
"""

from __future__ import annotations

from rclpy.node import Node

from wam_core.common.config import TaskManagerParams
from wam_util.diagnostics import NodeDiagnostics
from wam_util.executors import run_node
from wam_util.metrics import NodeMetrics
from wam_util.params import NodeParams

from .task_manager import TaskManager


class TaskManagerNode(Node):
    def __init__(self, name: str = 'task_manager', embedders=None, **kwargs):
        """``embedders``: a host's ``SharedEmbedders`` (several robots in one process)."""
        super().__init__(name, **kwargs)
        self.cfg = NodeParams(self, TaskManagerParams).read()  # ConfigError names it
        self.diagnostics = NodeDiagnostics(self)
        self.tasks = TaskManager(self, self.cfg, self.diagnostics, embedders)
        self.create_timer(1.0, self.diagnostics.publish)
        self.metrics = NodeMetrics(self, self.cfg.metrics_port)
        self.metrics.latency('plan', self.tasks.plan_ms, 'instruction -> validated plan, s')
        self.metrics.status('task_manager', self.tasks.status)
        self.metrics.start()

    def destroy_node(self):
        self.metrics.stop()
        self.tasks.close()
        return super().destroy_node()


def main(args=None) -> None:
    run_node(TaskManagerNode, args)


if __name__ == '__main__':
    main()
