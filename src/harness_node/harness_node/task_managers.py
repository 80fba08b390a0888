"""Several robots' task managers in one process.

A task manager is a few milliseconds of work per instruction and nothing per control
tick (0.002 cores each in the fleet curve), but its own process costs ~110 MB PSS:
the interpreter's private pages, the LLM client, MiniLM's tokenizer and skill
prototypes. A fleet puts its robots' task managers in one such process: each robot
keeps its own ``/<robot>/task_manager`` node (the ExecuteTask action, subtasks, status,
/diagnostics, its own planner, plan cache and worker thread, so one robot's slow LLM
call never queues another's plan) and they share one MiniLM (``SharedEmbedders``). The
gates stay one per robot, in their own processes: they clamp every chunk on its way to
the robot, and isolation is the point of them (docs/fleet.md has the figures).

    ros2 run harness_node task_managers --ros-args --params-file config/wam.yaml \\
        -p robots:=[robot1,robot2,robot3,robot4]
"""

from __future__ import annotations

from rclpy.node import Node

from wam_core.common.config import TaskManagersParams
from wam_core.common.params import ConfigError
from wam_core.planning.embedding import SharedEmbedders
from wam_util.executors import run_node
from wam_util.params import NodeParams

from .task_node import TaskManagerNode


class TaskManagerHost(Node):
    def __init__(self, **kwargs):
        super().__init__('task_managers', **kwargs)
        self.cfg = NodeParams(self, TaskManagersParams).read()
        if not self.cfg.robots:  # (wam.yaml lists none: the bring-up's layout does)
            raise ConfigError('parameter robots must name at least one robot, got []')
        if len(set(self.cfg.robots)) != len(self.cfg.robots):
            raise ConfigError(f'parameter robots names a robot twice: {self.cfg.robots}')
        self.embedders = SharedEmbedders()
        self.managers: dict[str, TaskManagerNode] = {}

    def bring_up(self) -> list[TaskManagerNode]:
        for robot in self.cfg.robots:
            # (a metrics_port set for all of them: the first serves it, the others warn)
            self.managers[robot] = TaskManagerNode(namespace=f'/{robot}', embedders=self.embedders)
        self.get_logger().info(f'task managers for {", ".join(self.cfg.robots)}')
        return list(self.managers.values())


def main(args=None) -> None:
    run_node(TaskManagerHost, args, hosted=lambda host: host.bring_up())


if __name__ == '__main__':
    main()
