"""Synthetic robot: /camera/image_raw (rgb8, 30 Hz) and /joint_states (100 Hz); with
``cameras: [front, wrist]`` also /wrist_camera/image_raw (the same scene, another seed),
stamped with the front frame's stamp."""

from __future__ import annotations

import time

from rclpy.node import Node
from sensor_msgs.msg import Image, JointState

from wam_core.common.clock import wall_ns
from wam_core.common.config import SyntheticRobotParams, camera_topic
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
        q = self.scene.joints(time.monotonic() - self._t0)
        for i, lower, upper in self._prismatic:  # fingers: within their travel (m)
            q[i] = lower + (upper - lower) * (0.5 + 0.375 * q[i])
        msg.position = q.tolist()
        self._js_pub.publish(msg)


def main(args=None) -> None:
    run_node(SyntheticRobot, args)


if __name__ == '__main__':
    main()
