"""Robot agent: runs IDLE -> PERCEIVE -> PLAN -> ACT -> OBSERVE as a client of the harness.

The state machine is wam_core.agent.task_cycle.Agent; this node feeds it facts (camera
and joint states flowing, the ExecuteTask goal's acceptance and result, the simulator's success
signal), sends goals when it asks, publishes /agent/state and reports transitions in
/diagnostics.
"""

from __future__ import annotations

import time

from rclpy.action import ActionClient
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Bool, String

from wam_core.agent.task_cycle import ABORTED, Agent
from wam_core.common.config import AgentParams
from wam_core.common.status import OK, WARN
from wam_interfaces.action import ExecuteTask
from wam_interfaces.msg import PerceivedObjects
from wam_util import qos
from wam_util.diagnostics import NodeDiagnostics
from wam_util.executors import run_node
from wam_util.params import NodeParams


class AgentNode(Node):
    def __init__(self, name: str = 'robot_agent', **kwargs):
        super().__init__(name, **kwargs)
        self.cfg = NodeParams(self, AgentParams).read()  # ConfigError names a bad parameter
        self.agent = Agent(self.cfg)
        self._last_image = self._last_joints = 0.0
        self.success = None
        self._accepted = None
        self._result = None
        self._want_goal = False
        self._sent = False
        self.progress = ''
        self._state_pub = self.create_publisher(String, 'agent/state', qos.EVENTS)
        self.create_subscription(Image, 'camera/image_raw', self._on_image, qos.SENSOR)
        self.create_subscription(JointState, 'joint_states', self._on_joints, qos.SENSOR)
        self.create_subscription(Bool, 'sim/task_success', self._on_success, qos.EVENTS)
        # PERCEIVE: what the robot sees, reported latched for the harness to ground plans on
        self.objects: PerceivedObjects | None = None
        self._objects_pub = self.create_publisher(
            PerceivedObjects, 'perceived_objects', qos.LATCHED
        )
        if self.cfg.perception_topic:
            self.create_subscription(
                PerceivedObjects,
                self.cfg.perception_topic,
                lambda m: setattr(self, 'objects', m),
                qos.LATCHED,
            )
        self._client = ActionClient(self, ExecuteTask, 'harness/execute_task')
        self.diagnostics = NodeDiagnostics(self)
        self.diagnostics.add('robot agent', self._diagnostics)
        self.create_timer(1.0, self.diagnostics.publish)
        self.create_timer(0.05, self._step)
        self._published = ''
        if self.cfg.autostart:
            self.agent.start(self.cfg.instruction, time.monotonic())

    def _on_image(self, _msg) -> None:
        self._last_image = time.monotonic()

    def _on_joints(self, _msg) -> None:
        self._last_joints = time.monotonic()

    def _on_success(self, msg: Bool) -> None:
        self.success = bool(msg.data)

    def _send_goal(self) -> None:
        # Sent once the harness's action server is up; PLAN times out with a reason if never.
        self._want_goal = False
        self._sent = True  # the plan timeout counts from now
        self._accepted = self._result = None
        fut = self._client.send_goal_async(
            ExecuteTask.Goal(instruction=self.agent.instruction),
            feedback_callback=self._on_feedback,
        )
        fut.add_done_callback(self._on_goal_response)

    def _on_feedback(self, msg) -> None:
        fb = msg.feedback
        text = (
            f'{fb.state} {fb.active_index + 1}/{len(fb.plan)}: {fb.active_skill}'
            if fb.plan
            else fb.state
        )
        if text != self.progress:
            self.progress = text
            self.get_logger().info(f'task progress ({fb.planner or "planning"}): {text}')

    def _on_goal_response(self, fut) -> None:
        handle = fut.result()
        self._accepted = bool(handle.accepted)
        if handle.accepted:
            handle.get_result_async().add_done_callback(
                lambda f: setattr(
                    self, '_result', (f.result().result.success, f.result().result.reason)
                )
            )

    def _step(self) -> None:
        now = time.monotonic()
        perception_ok = (
            now - self._last_image < 0.5
            and now - self._last_joints < 0.5
            and (self.objects is not None or not self.cfg.perception_topic)
        )
        accepted, self._accepted = self._accepted, None
        result, self._result = self._result, None
        sent, self._sent = self._sent, False
        action = self.agent.step(
            now,
            perception_ok=perception_ok,
            goal_sent=sent,
            goal_accepted=accepted,
            result=result,
            success=self.success,
        )
        if action == 'send_goal':  # PERCEIVE is done: report what it saw, then plan
            if self.objects is not None:
                self._objects_pub.publish(self.objects)
                seen = ', '.join(f'{o.color} {o.label}'.strip() for o in self.objects.objects)
                self.get_logger().info(f'perceived: {seen or "nothing"}')
            self._want_goal = True
        if self._want_goal and self._client.server_is_ready():
            self._send_goal()
        if self.agent.state != self._published:
            self._published = self.agent.state
            self._state_pub.publish(String(data=self.agent.state))
            self.get_logger().info(f'agent -> {self.agent.state}: {self.agent.reason}')

    def _diagnostics(self):
        a = self.agent
        level = WARN if a.state == ABORTED else OK
        values = [
            ('state', a.state),
            ('reason', a.reason),
            ('instruction', a.instruction),
            ('attempts', a.attempts),
            ('transitions', len(a.transitions)),
            ('task progress', self.progress),
            ('task success signal', self.success),
        ]
        values += [
            (f'transition {i}', f'{t1:.2f}s {s0}->{s1}: {why}')
            for i, (t1, s0, s1, why) in enumerate(a.transitions[-5:])
        ]
        return level, f'{a.state}: {a.reason}', values


def main(args=None) -> None:
    run_node(AgentNode, args)


if __name__ == '__main__':
    main()
