"""Synthetic robot: /camera/image_raw (rgb8, 30 Hz) and /joint_states (100 Hz); with
``cameras: [front, wrist]`` also /wrist_camera/image_raw (the same scene, another seed),
stamped with the front frame's stamp. Its joints follow a scripted motion, or with
``follow_commands`` the trajectories it is sent (an ideal position controller: what a
policy commands is where the arm goes, so a policy that drives a joint to its limit
takes it there)."""

from __future__ import annotations

import time

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from trajectory_msgs.msg import JointTrajectory

from wam_core.common.clock import wall_ns, wall_s
from wam_core.common.config import SyntheticRobotParams, camera_topic
from wam_core.control.trajectory import Trajectory
from wam_sim.synthetic import SyntheticScene
from wam_util import convert, qos
from wam_util.executors import run_node
from wam_util.params import NodeParams


class SyntheticRobot(Node):
    def __init__(self, name: str = 'synthetic_robot', **kwargs):
        super().__init__(name, **kwargs)
        self.cfg = cfg = NodeParams(self, SyntheticRobotParams).read()
        self.joint_names = list(cfg.robot.joint_names)
        size = cfg.image_size
        self.scene = SyntheticScene(size, len(self.joint_names), cfg.seed, cfg.static_scene)
        robot = cfg.robot.description()  # which joints are prismatic, and their ranges
        self._prismatic = [
            (i, robot.limits[n].lower, robot.limits[n].upper)
            for i, n in enumerate(self.joint_names)
            if n in robot.prismatic
        ]
        self.frames = 0
        self._t0 = time.monotonic()
        self._img_pub = self.create_publisher(Image, camera_topic('front'), qos.SENSOR)
        # other views: the same moving square from another seed (a distinct picture)
        self._views = {
            c: (
                self.create_publisher(Image, camera_topic(c), qos.SENSOR),
                SyntheticScene(size, len(self.joint_names), cfg.seed + 1 + i, cfg.static_scene),
            )
            for i, c in enumerate(x for x in cfg.cameras if x != 'front')
        }
        self._js_pub = self.create_publisher(JointState, 'joint_states', qos.SENSOR)
        self._command: Trajectory | None = None  # follow_commands: the one being executed
        self._last_q: np.ndarray | None = None
        if cfg.follow_commands:
            self.create_subscription(
                JointTrajectory, 'arm_controller/joint_trajectory', self._on_command, qos.EVENTS
            )
        self.camera_paused = False
        self.create_timer(1.0 / cfg.camera_hz, self._publish_frame)
        self.create_timer(1.0 / cfg.joint_state_hz, self._publish_joints)
        self._img = Image(height=size, width=size, encoding='rgb8', step=3 * size, is_bigendian=0)
        self._img.header.frame_id = 'camera_optical_frame'

    def _publish_frame(self) -> None:
        if self.camera_paused:  # a stalled camera, for tests and fault drills
            return
        self._img.header.stamp = convert.ns_to_stamp(wall_ns())
        self._img.data = self.scene.frame(self.frames).tobytes()
        self._img_pub.publish(self._img)
        for pub, scene in self._views.values():
            self._img.data = scene.frame(self.frames).tobytes()
            pub.publish(self._img)
        self.frames += 1

    def _publish_joints(self) -> None:
        msg = JointState()
        msg.header.stamp = convert.ns_to_stamp(wall_ns())
        msg.name = self.joint_names
        if self._command is not None:
            q = self._command.sample(wall_s())[0]
        else:
            q = self.scene.joints(time.monotonic() - self._t0)
            for i, lower, upper in self._prismatic:  # fingers: within their travel (m)
                q[i] = lower + (upper - lower) * (0.5 + 0.375 * q[i])
        self._last_q = np.asarray(q, dtype=float)
        msg.position = self._last_q.tolist()
        self._js_pub.publish(msg)

    def _on_command(self, msg: JointTrajectory) -> None:
        """Execute ``msg`` from where the arm is: a trajectory whose point 0 lies ahead is
        reached linearly from the current position (as a controller replaces a command)."""
        if not msg.points or list(msg.joint_names) != self.joint_names:
            return
        now = wall_s()
        start = convert.stamp_to_ns(msg.header.stamp) * 1e-9 or now  # 0: "now"
        times = np.array(convert.trajectory_times(msg), dtype=float)
        pos = np.array(convert.trajectory_positions(msg), dtype=float)
        here = self._last_q
        if here is not None and start + times[0] > now + 1e-6:
            times = np.concatenate([[now - start], times])
            pos = np.vstack([here[None], pos])
        self._command = Trajectory(start, times, pos)


def main(args=None) -> None:
    run_node(SyntheticRobot, args)


if __name__ == '__main__':
    main()
