"""The simulated robot on ROS topics, as a ros2_control robot would present itself.

/camera/image_raw (rgb8, 30 Hz), /joint_states (100 Hz, positions and velocities);
executes /arm_controller/joint_trajectory with joint_trajectory_controller semantics
and freezes on /safety/stop; publishes the success detector (apple in the fridge) on
/sim/task_success at 10 Hz. Physics advances in real time, 10 ms per timer tick.
"""

from __future__ import annotations

import time

from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Bool
from trajectory_msgs.msg import JointTrajectory

from wam_core.common.clock import wall_ns
from wam_core.common.config import SimRobotParams, camera_topic
from wam_interfaces.msg import PerceivedObjects, SceneObject
from wam_sim.tabletop import JOINT_NAMES, TabletopSim
from wam_util import convert, qos
from wam_util.executors import run_node
from wam_util.params import NodeParams


class SimRobot(Node):
    def __init__(self, name: str = 'sim_robot', **kwargs):
        super().__init__(name, **kwargs)
        self.cfg = NodeParams(self, SimRobotParams).read()  # ConfigError names a bad parameter
        self.sim = TabletopSim(seed=self.cfg.seed, image_size=self.cfg.image_size)
        self.camera_paused = False
        self.camera_frozen = False  # fault drills: republish the last frame with new stamps
        self.paused_cameras: set[str] = set()  # fault drills: one view of several stops
        self.clock_offset_s = 0.0  # fault drills: a jumped clock on the robot's stamps
        self._last_img = None
        self.record = None  # a list to collect camera frames into (demo --gif)
        self.frames = 0
        self.rejected = 0
        self._camera_period = 1.0 / self.cfg.camera_hz
        self._next_frame = time.monotonic()
        self._img_pubs = {
            c: self.create_publisher(Image, camera_topic(c), qos.SENSOR) for c in self.cfg.cameras
        }
        self._js_pub = self.create_publisher(JointState, 'joint_states', qos.SENSOR)
        self.create_subscription(
            JointTrajectory, 'arm_controller/joint_trajectory', self._on_trajectory, qos.EVENTS
        )
        self.create_subscription(
            Bool, 'safety/stop', lambda m: self.sim.set_stop(bool(m.data)), qos.LATCHED
        )
        self._success_pub = self.create_publisher(Bool, 'sim/task_success', qos.EVENTS)
        self._last = time.monotonic()
        self.create_timer(0.01, self._step)
        self.create_timer(0.1, lambda: self._success_pub.publish(Bool(data=self.sim.success())))
        # what a detector on the front camera would see (the simulator's ground truth):
        # the robot agent's PERCEIVE step reports it, the harness grounds plans on it
        self._objects_pub = self.create_publisher(
            PerceivedObjects, 'sim/visible_objects', qos.LATCHED
        )
        self._objects: list = []
        self.create_timer(0.1, self._publish_objects)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            stamp_ns = convert.stamp_to_ns(msg.header.stamp)
            # header.stamp (wall clock) onto sim time; a zero stamp means "now" (start_time 0)
            start = max(self.sim.time + (stamp_ns - wall_ns()) * 1e-9, 1e-9) if stamp_ns else 0.0
            times = convert.trajectory_times(msg)
            self.sim.command(
                msg.joint_names,
                convert.trajectory_positions(msg),
                times,
                start_time=start,
                velocities=convert.trajectory_velocities(msg),
            )
        except (ValueError, IndexError) as exc:
            self.rejected += 1
            self.get_logger().warning(f'rejected trajectory: {exc}', throttle_duration_sec=1.0)

    def _step(self) -> None:
        now = time.monotonic()
        self.sim.step(min(now - self._last, 0.05))  # real time; never more than 50 ms at once
        self._last = now
        stamp = convert.ns_to_stamp(wall_ns() + int(self.clock_offset_s * 1e9))
        js = JointState(
            name=list(JOINT_NAMES),
            position=self.sim.joint_positions().tolist(),
            velocity=self.sim.joint_velocities().tolist(),
        )
        js.header.stamp = stamp
        self._js_pub.publish(js)
        if now >= self._next_frame and not self.camera_paused:
            self._next_frame += self._camera_period
            if self._next_frame < now:
                self._next_frame = now + self._camera_period
            frozen = self.camera_frozen and self._last_img is not None
            imgs = self._last_img if frozen else {c: self.sim.render(c) for c in self._img_pubs}
            self._last_img = imgs
            if not self.context.ok():  # Ctrl-C during the renders: the publishers are gone
                return
            for c, img in imgs.items():  # one stamp for every view: a triggered rig
                if c in self.paused_cameras:
                    continue
                msg = Image(
                    height=img.shape[0], width=img.shape[1], encoding='rgb8', step=3 * img.shape[1]
                )
                msg.header.stamp = stamp
                msg.header.frame_id = camera_topic(c).split('/')[0] + '_optical_frame'
                msg.data = img.tobytes()
                self._img_pubs[c].publish(msg)
            self.frames += 1
            if self.record is not None and len(self.record) < 3000:
                self.record.append(next(iter(imgs.values())))

    def _publish_objects(self) -> None:
        objects = self.sim.visible_objects()
        if objects == self._objects:
            return
        self._objects = objects
        msg = PerceivedObjects(source="sim: objects inside the front camera's image")
        msg.header.stamp = convert.ns_to_stamp(wall_ns())
        msg.objects = [SceneObject(label=label, color=color) for label, color in objects]
        self._objects_pub.publish(msg)


def main(args=None) -> None:
    run_node(SimRobot, args)


if __name__ == '__main__':
    main()
