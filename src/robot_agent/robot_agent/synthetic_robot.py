"""Synthetic robot: /camera/image_raw (rgb8, 30 Hz) and /joint_states (100 Hz)."""

from __future__ import annotations

import time

from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState

from wam_core import ros_convert as rc
from wam_core.config import DEFAULT_JOINT_NAMES
from wam_core.synthetic import SyntheticScene
from wam_util.executors import run_node


class SyntheticRobot(Node):
    def __init__(self, name: str = 'synthetic_robot', **kwargs):
        super().__init__(name, **kwargs)
        self.declare_parameter('camera_hz', 30.0)
        self.declare_parameter('joint_state_hz', 100.0)
        self.declare_parameter('image_size', 128)
        self.declare_parameter('static_scene', False)
        self.declare_parameter('seed', 0)
        self.declare_parameter('control.joint_names', list(DEFAULT_JOINT_NAMES))
        self.joint_names = list(self.get_parameter('control.joint_names').value)
        size = int(self.get_parameter('image_size').value)
        self.scene = SyntheticScene(
            size,
            len(self.joint_names),
            int(self.get_parameter('seed').value),
            bool(self.get_parameter('static_scene').value),
        )
        self._grippers = [i for i, n in enumerate(self.joint_names) if 'gripper' in n]
        self.frames = 0
        self._t0 = time.monotonic()
        self._img_pub = self.create_publisher(Image, '/camera/image_raw', qos_profile_sensor_data)
        self._js_pub = self.create_publisher(JointState, '/joint_states', qos_profile_sensor_data)
        self.camera_paused = False
        self.create_timer(1.0 / self.get_parameter('camera_hz').value, self._publish_frame)
        self.create_timer(1.0 / self.get_parameter('joint_state_hz').value, self._publish_joints)
        self._img = Image(height=size, width=size, encoding='rgb8', step=3 * size, is_bigendian=0)
        self._img.header.frame_id = 'camera_optical_frame'

    def _publish_frame(self) -> None:
        if self.camera_paused:  # a stalled camera, for tests and fault drills
            return
        self._img.header.stamp = rc.ns_to_stamp(time.time_ns())
        self._img.data = self.scene.frame(self.frames).tobytes()
        self._img_pub.publish(self._img)
        self.frames += 1

    def _publish_joints(self) -> None:
        msg = JointState()
        msg.header.stamp = rc.ns_to_stamp(time.time_ns())
        msg.name = self.joint_names
        q = self.scene.joints(time.monotonic() - self._t0)
        for i in self._grippers:  # prismatic fingers: keep within 0..0.04 m
            q[i] = 0.02 + 0.03 * q[i]
        msg.position = q.tolist()
        self._js_pub.publish(msg)


def main(args=None) -> None:
    run_node(SyntheticRobot, args)


if __name__ == '__main__':
    main()
