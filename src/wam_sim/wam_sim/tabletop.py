"""Simulated tabletop robot: MuJoCo physics, offscreen camera, joint-trajectory control.

A 6-revolute-joint arm with a parallel gripper, a red cube (the "apple"), distractor
cubes of other colours and an open-top box (the "fridge"). Object positions are drawn
from the episode seed; physics is deterministic, so a seed plus the same commands
give the same episode. No rclpy here: the robot_agent node wires it to ROS topics.

Commands follow ros2_control's joint_trajectory_controller:
- a new trajectory replaces the current one from its start time (header.stamp;
  0 means "now"); until then the old one keeps running;
- between points, positions are interpolated linearly in time_from_start, or with a
  cubic spline when the points carry velocities (``wam_core.control.trajectory``),
  starting from the setpoint (and its velocity) held when the new trajectory took over;
- points whose time is already past when the trajectory starts are skipped;
- after the last point the setpoint holds.
A ``MotionLog`` attached as ``sim.motion_log`` records the commanded setpoint (jerk) and
the velocity jump at every takeover (chunk boundaries).
A safety stop freezes the arm where it is and ignores trajectories until released.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

os.environ.setdefault('MUJOCO_GL', 'egl')
# Without a GPU, EGL is Mesa's llvmpipe, which renders on one thread per core. Two
# 128 px views take the same 5 ms on the calling thread alone and 2 ms less CPU, and its
# helper threads no longer wake to compete with the encoder and the ticks (the one-process
# demo's camera stamp -> encoder queue p50 12.7/9.9/9.6/8.4 -> 8.0/7.6/7.6/7.2 ms in
# alternating runs, 2026-12-07). A GPU's EGL driver ignores it.
os.environ.setdefault('LP_NUM_THREADS', '0')
import mujoco  # noqa: E402  (MUJOCO_GL must be set before the import)

from wam_core.common.robot import TABLETOP_ARM  # noqa: E402
from wam_core.control.trajectory import Trajectory  # noqa: E402

JOINT_NAMES = list(TABLETOP_ARM.joint_names)
CAMERAS = ('front', 'wrist')  # the scene's cameras (views)
HOME = np.array([0.0, -0.6, 1.2, -0.6, 0.0, 0.0, 0.04])
TABLE_Z = 0.4
FRIDGE_HALF = np.array([0.07, 0.07])
DISTRACTOR_COLORS = {'green': '0.1 0.7 0.2 1', 'blue': '0.1 0.3 0.9 1', 'yellow': '0.9 0.8 0.1 1'}
# The front camera: position, image x and y axes in the world (MuJoCo's xyaxes), vertical field of view.
CAMERA_POS = np.array([1.25, 0.0, 1.05])
CAMERA_X = np.array([0.0, 1.0, 0.0])
CAMERA_Y = np.array([-0.6, 0.0, 0.8])
CAMERA_FOVY_DEG = 55.0


def _pinhole(points, pos, x_axis, y_axis, fovy_deg: float, image_size: int):
    """World points [..., 3] -> ((column, row) pixels from the top-left corner, depth) for
    a camera at ``pos`` whose image x and y axes are given in the world; it looks along
    -z (MuJoCo's camera convention)."""
    d = np.asarray(points, dtype=np.float64) - pos
    depth = -(d @ np.cross(x_axis, y_axis))
    f = 0.5 * image_size / np.tan(np.radians(fovy_deg) / 2)
    with np.errstate(divide='ignore', invalid='ignore'):
        col = 0.5 * image_size + f * (d @ x_axis) / depth
        row = 0.5 * image_size - f * (d @ y_axis) / depth
    return np.stack([col, row], axis=-1), depth


def camera_pixels(points: np.ndarray, image_size: int = 128) -> np.ndarray:
    """World points [..., 3] -> (column, row) in the front camera's image, pixels from the
    top-left corner (the layout of ``TabletopSim.render``): pinhole projection."""
    return _pinhole(points, CAMERA_POS, CAMERA_X, CAMERA_Y, CAMERA_FOVY_DEG, image_size)[0]


def _range(joint: str) -> str:
    """A joint's position range in MJCF, from the robot description."""
    limit = TABLETOP_ARM.limits[joint]
    return f'{limit.lower} {limit.upper}'


def _pos(joint: str) -> str:
    """Where a joint's child body sits in its parent (MJCF pos), from the URDF."""
    return ' '.join(f'{v:g}' for v in TABLETOP_ARM.origins[joint][0])


def _axis(joint: str) -> str:
    """A joint's axis (MJCF axis), from the URDF."""
    name = TABLETOP_ARM.origins[joint][1]
    sign = -1 if name.startswith('-') else 1
    return ' '.join(str(sign if 'xyz'[i] == name[-1] else 0) for i in range(3))


def scene_xml(image_size: int = 128) -> str:
    distractors = ''.join(
        f'<body name="{c}_cube" pos="0 0 0"><freejoint name="{c}_free"/>'
        f'<geom type="box" size=".02 .02 .02" rgba="{rgba}" mass="0.05" friction="1 0.01 0.001"/></body>'
        for c, rgba in DISTRACTOR_COLORS.items()
    )
    return f"""
<mujoco model="wam_tabletop">
  <compiler angle="radian"/>
  <option timestep="0.002" integrator="implicitfast"/>
  <visual><global offwidth="{image_size}" offheight="{image_size}"/><quality shadowsize="0"/>
    <map znear="0.01"/></visual>
  <default><joint damping="2" armature="0.05"/><geom condim="4" friction="1 0.01 0.001"/>
    <!-- arm geoms touch the world and objects but never each other -->
    <default class="arm"><geom contype="2" conaffinity="1"/></default></default>
  <worldbody>
    <light pos="0 0 2.5" dir="0 0 -1" castshadow="false"/>
    <geom name="floor" type="plane" size="2 2 0.1" rgba=".5 .5 .5 1"/>
    <geom name="table" type="box" pos="0.45 0 {TABLE_Z / 2}" size="0.4 0.5 {TABLE_Z / 2}" rgba=".6 .45 .3 1"/>
    <camera name="front" pos="{' '.join(map(str, CAMERA_POS))}" xyaxes="{' '.join(map(str, [*CAMERA_X, *CAMERA_Y]))}"
            fovy="{CAMERA_FOVY_DEG}"/>
    <body name="base" pos="0 0 {TABLE_Z}" childclass="arm">
      <geom type="cylinder" size=".06 .05" pos="0 0 .05" rgba=".2 .2 .2 1"/>
      <body name="link1" pos="{_pos('arm_joint_1')}">
        <joint name="arm_joint_1" range="{_range('arm_joint_1')}" axis="{_axis('arm_joint_1')}"/>
        <geom type="capsule" fromto="0 0 0 0 0 .1" size=".04" rgba=".8 .8 .8 1"/>
        <body name="link2" pos="{_pos('arm_joint_2')}">
          <joint name="arm_joint_2" range="{_range('arm_joint_2')}" axis="{_axis('arm_joint_2')}"/>
          <geom type="capsule" fromto="0 0 0 .3 0 0" size=".035" rgba=".8 .8 .8 1"/>
          <body name="link3" pos="{_pos('arm_joint_3')}">
            <joint name="arm_joint_3" range="{_range('arm_joint_3')}" axis="{_axis('arm_joint_3')}"/>
            <geom type="capsule" fromto="0 0 0 .28 0 0" size=".03" rgba=".8 .8 .8 1"/>
            <body name="link4" pos="{_pos('arm_joint_4')}">
              <joint name="arm_joint_4" range="{_range('arm_joint_4')}" axis="{_axis('arm_joint_4')}"/>
              <geom type="capsule" fromto="0 0 0 .06 0 0" size=".025" rgba=".7 .7 .7 1"/>
              <body name="link5" pos="{_pos('arm_joint_5')}">
                <joint name="arm_joint_5" range="{_range('arm_joint_5')}" axis="{_axis('arm_joint_5')}"/>
                <geom type="cylinder" fromto="0 0 0 .02 0 0" size=".022" rgba=".7 .7 .7 1"/>
                <body name="link6" pos="{_pos('arm_joint_6')}">
                  <joint name="arm_joint_6" range="{_range('arm_joint_6')}" axis="{_axis('arm_joint_6')}"/>
                  <geom type="box" size=".015 .05 .015" pos=".015 0 0" rgba=".3 .3 .3 1"/>
                  <site name="tcp" pos="{_pos('tcp_joint')}"/>
                  <!-- the wrist camera: above the fingers, looking along them (and down
                       at what they reach), so the hand never hides the object from it -->
                  <camera name="wrist" pos="0.0 0 0.05" xyaxes="0 -1 0 0.5 0 0.87" fovy="75"/>
                  <body name="finger_l" pos="{_pos('gripper_joint')}">
                    <joint name="gripper_joint" type="slide" axis="{_axis('gripper_joint')}" range="{_range('gripper_joint')}" damping="5"/>
                    <geom type="box" size=".04 .006 .012" pos=".04 .006 0" rgba=".2 .2 .2 1" friction="2 0.05 0.001"/>
                  </body>
                  <body name="finger_r" pos="{_pos('finger_r_joint')}">
                    <joint name="finger_r" type="slide" axis="{_axis('finger_r_joint')}" range="{_range('gripper_joint')}" damping="5"/>
                    <geom type="box" size=".04 .006 .012" pos=".04 -.006 0" rgba=".2 .2 .2 1" friction="2 0.05 0.001"/>
                  </body>
                </body>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>
    <body name="apple" pos="0 0 0"><freejoint name="apple_free"/>
      <geom type="box" size=".02 .02 .02" rgba=".9 .1 .1 1" mass="0.05" friction="1.5 0.01 0.001"/></body>
    {distractors}
    <body name="fridge" pos="0 0 {TABLE_Z}">
      <geom type="box" size="{FRIDGE_HALF[0]} {FRIDGE_HALF[1]} .004" pos="0 0 .004" rgba=".9 .9 .95 1"/>
      <geom type="box" size=".004 {FRIDGE_HALF[1]} .03" pos="{FRIDGE_HALF[0]} 0 .03" rgba=".9 .9 .95 1"/>
      <geom type="box" size=".004 {FRIDGE_HALF[1]} .03" pos="-{FRIDGE_HALF[0]} 0 .03" rgba=".9 .9 .95 1"/>
      <geom type="box" size="{FRIDGE_HALF[0]} .004 .03" pos="0 {FRIDGE_HALF[1]} .03" rgba=".9 .9 .95 1"/>
      <geom type="box" size="{FRIDGE_HALF[0]} .004 .03" pos="0 -{FRIDGE_HALF[1]} .03" rgba=".9 .9 .95 1"/>
    </body>
  </worldbody>
  <equality><joint joint1="gripper_joint" joint2="finger_r"/></equality>
  <actuator>
    {''.join(f'<position name="{j}" joint="{j}" kp="400" kv="40" ctrlrange="{_range(j)}"/>' for j in JOINT_NAMES[:6])}
    <position name="gripper_joint" joint="gripper_joint" kp="300" kv="20" ctrlrange="{_range('gripper_joint')}"/>
  </actuator>
</mujoco>"""


class MotionLog:
    """What the robot was commanded, for smoothness figures: the setpoint every
    ``sample_s`` of sim time and the velocity jump (max over the arm joints, rad/s) at
    every trajectory takeover. Attach one to a sim for an episode; nothing is kept
    without it."""

    def __init__(self, sample_s: float = 0.01):
        self.sample_s = sample_s
        self.setpoints: list[np.ndarray] = []
        self.boundary_jumps: list[float] = []
        self._next = None

    def sample(self, t: float, setpoint: np.ndarray) -> None:
        if self._next is None or t >= self._next - 1e-9:
            self.setpoints.append(setpoint.copy())
            self._next = (self._next if self._next is not None else t) + self.sample_s

    def jerk(self) -> np.ndarray:
        """|third derivative| of the arm joints' commanded positions, rad/s^3, [K, 6]."""
        p = np.array(self.setpoints)
        if len(p) < 4:
            return np.zeros((0, 6))
        return np.abs(np.diff(p[:, :6], n=3, axis=0)) / self.sample_s**3

    def figures(self) -> dict:
        """jerk_rms and jerk_max (rad/s^3, None before 4 samples) and the boundary jumps."""
        jerk = self.jerk()
        return {
            'jerk_rms': float(np.sqrt(np.mean(jerk**2))) if jerk.size else None,
            'jerk_max': float(np.max(jerk)) if jerk.size else None,
            'boundary_jumps': [round(j, 5) for j in self.boundary_jumps],
        }


class TabletopSim:
    def __init__(self, seed: int = 0, image_size: int = 128, render: bool = True):
        self.model = mujoco.MjModel.from_xml_string(scene_xml(image_size))
        self.data = mujoco.MjData(self.model)
        self.image_size = image_size
        self._qadr = [self.model.jnt_qposadr[self.model.joint(j).id] for j in JOINT_NAMES]
        self._dadr = [self.model.jnt_dofadr[self.model.joint(j).id] for j in JOINT_NAMES]
        self._renderer = mujoco.Renderer(self.model, image_size, image_size) if render else None
        self.stopped = False
        self.reset(seed)

    # episode ----------------------------------------------------------------------
    def reset(self, seed: int) -> None:
        mujoco.mj_resetData(self.model, self.data)
        rng = np.random.default_rng(seed)
        self.seed = seed
        for i, a in enumerate(self._qadr):
            self.data.qpos[a] = HOME[i]
        self.data.qpos[self.model.jnt_qposadr[self.model.joint('finger_r').id]] = HOME[6]
        # fridge on one side, apple and distractors spread over the rest of the reach
        side = rng.choice([-1.0, 1.0])
        fridge = np.array([rng.uniform(0.42, 0.52), side * rng.uniform(0.22, 0.3)])
        self.model.body('fridge').pos[:2] = fridge
        taken = [fridge]
        for name in ['apple'] + [f'{c}_cube' for c in DISTRACTOR_COLORS]:
            for _ in range(100):
                xy = np.array([rng.uniform(0.35, 0.6), rng.uniform(-0.25, 0.25)])
                if all(np.linalg.norm(xy - t) > 0.12 for t in taken):
                    break
            taken.append(xy)
            adr = self.model.jnt_qposadr[self.model.joint(f'{name.split("_")[0]}_free').id]
            self.data.qpos[adr : adr + 3] = [xy[0], xy[1], TABLE_Z + 0.021]
            self.data.qpos[adr + 3 : adr + 7] = [1, 0, 0, 0]
        self.data.ctrl[:] = HOME
        mujoco.mj_forward(self.model, self.data)
        self.setpoint = HOME.copy()
        self.setpoint_velocity = np.zeros_like(HOME)
        self.trajectory: Trajectory | None = None
        self.pending: list[Trajectory] = []
        self.motion_log: MotionLog | None = None
        self.stopped = False
        self.stop_time: float | None = None

    @property
    def time(self) -> float:
        return float(self.data.time)

    def joint_positions(self) -> np.ndarray:
        return np.array([self.data.qpos[a] for a in self._qadr])

    def joint_velocities(self) -> np.ndarray:
        return np.array([self.data.qvel[a] for a in self._dadr])

    def visible_objects(self) -> list[tuple[str, str]]:
        """(class, colour) of every object whose centre lies inside the front camera's
        image: what a perfect detector on that camera would report (ground truth, a
        stand-in for perception)."""
        named = [('apple', 'apple', 'red'), ('fridge', 'fridge', '')]
        named += [(f'{c}_cube', 'cube', c) for c in DISTRACTOR_COLORS]
        out = []
        for body, label, color in named:
            col, row = camera_pixels(self.body_position(body), self.image_size)
            if 0 <= col < self.image_size and 0 <= row < self.image_size:
                out.append((label, color))
        return out

    def view_pixels(self, camera: str, points: np.ndarray) -> np.ndarray:
        """World points [..., 3] -> (column, row) in ``camera``'s image as it is now (the
        wrist camera moves with the arm), pixels from the top-left corner; NaN where a
        point lies behind the camera or outside the image. The dense labels that teach
        the world expert where objects are in each view."""
        if camera not in CAMERAS:
            raise ValueError(f'no camera {camera!r}; the sim has {CAMERAS}')
        cam = self.data.camera(camera)
        axes = cam.xmat.reshape(3, 3)  # columns: the camera's x, y, z axes in the world
        fovy = float(self.model.camera(camera).fovy[0])
        px, depth = _pinhole(points, cam.xpos, axes[:, 0], axes[:, 1], fovy, self.image_size)
        inside = (depth > 1e-3) & np.all((px >= 0) & (px < self.image_size), axis=-1)
        return np.where(inside[..., None], px, np.nan)

    def object_pixels(self, camera: str) -> np.ndarray:
        """The apple's and the fridge's centres in ``camera``'s image [2, 2] (NaN: not in it)."""
        fridge = self.body_position('fridge')
        fridge[2] = TABLE_Z + 0.03
        return self.view_pixels(camera, np.stack([self.body_position('apple'), fridge]))

    def body_position(self, name: str) -> np.ndarray:
        return self.data.body(name).xpos.copy()

    def tcp_position(self) -> np.ndarray:
        return self.data.site('tcp').xpos.copy()

    def success(self) -> bool:
        """The apple rests inside the fridge's walls, near its floor."""
        apple, fridge = self.body_position('apple'), self.body_position('fridge')
        inside = np.all(np.abs(apple[:2] - fridge[:2]) < FRIDGE_HALF - 0.01)
        return bool(inside and apple[2] < TABLE_Z + 0.05)

    # commands -----------------------------------------------------------------------
    def command(
        self,
        names: Sequence[str],
        positions,
        time_from_start,
        start_time: float = 0.0,
        velocities=None,
    ) -> None:
        """A JointTrajectory: replaces the current one from start_time (0 = now)."""
        tfs = np.asarray(time_from_start, dtype=float)
        pos = np.asarray(positions, dtype=float).reshape(len(tfs), -1)
        vel = (
            None if velocities is None else np.asarray(velocities, dtype=float).reshape(pos.shape)
        )
        if list(names) != JOINT_NAMES:
            order = [list(names).index(j) for j in JOINT_NAMES]  # raises on a missing joint
            pos = pos[:, order]
            vel = None if vel is None else vel[:, order]
        start = self.time if start_time <= 0 else start_time
        self.pending.append(Trajectory(start, tfs, pos, vel))

    def set_stop(self, stopped: bool) -> None:
        if stopped and not self.stopped:
            self.setpoint = self.joint_positions()  # freeze where it is
            self.setpoint_velocity = np.zeros_like(self.setpoint)
            self.trajectory, self.pending = None, []
            self.stop_time = self.time
        self.stopped = stopped

    def _update_setpoint(self) -> None:
        now = self.time
        if self.stopped:
            return
        due = [t for t in self.pending if t.start <= now + 1e-9]
        if due:
            self.pending = [t for t in self.pending if t.start > now + 1e-9]
            traj = due[-1]
            keep = traj.start + traj.times > now + 1e-9  # points already past are skipped
            before = self.setpoint.copy(), self.setpoint_velocity.copy()
            if np.any(keep):
                vel = None if traj.velocities is None else traj.velocities[keep]
                self.trajectory = Trajectory(
                    traj.start, traj.times[keep], traj.positions[keep], vel, (now, *before)
                )
            else:
                self.trajectory = None
                self.setpoint = traj.positions[-1].copy()
            if self.motion_log is not None:
                # the velocity the new command runs at over the next physics step, against
                # the one it replaced
                dt = self.model.opt.timestep
                after = (
                    self.setpoint
                    if self.trajectory is None
                    else self.trajectory.sample(now + dt)[0]
                )
                jump = np.abs((after - before[0]) / dt - before[1])[:6]
                self.motion_log.boundary_jumps.append(float(np.max(jump)))
        traj = self.trajectory
        if traj is None:
            self.setpoint_velocity = np.zeros_like(self.setpoint)
            return
        if now >= traj.end:
            self.setpoint = traj.positions[-1].copy()
            self.setpoint_velocity = np.zeros_like(self.setpoint)
            self.trajectory = None
            return
        self.setpoint, self.setpoint_velocity = traj.sample(now)

    def step(self, seconds: float) -> None:
        n = max(1, int(round(seconds / self.model.opt.timestep)))
        for _ in range(n):
            self._update_setpoint()
            if self.motion_log is not None:
                self.motion_log.sample(self.time, self.setpoint)
            self.data.ctrl[:] = self.setpoint
            mujoco.mj_step(self.model, self.data)

    def render(self, camera: str = 'front') -> np.ndarray:
        """image_size^2 RGB uint8 from a camera, 'front' or 'wrist' (copy)."""
        if self._renderer is None:
            raise RuntimeError('created with render=False')
        if camera not in CAMERAS:
            raise ValueError(f'no camera {camera!r}; the sim has {CAMERAS}')
        self._renderer.update_scene(self.data, camera=camera)
        return self._renderer.render().copy()

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


class TcpKinematics:
    """Joint positions [7] -> TCP position [3] in the sim's arm model."""

    def __init__(self):
        self._sim = TabletopSim(render=False)
        m = self._sim.model
        self._data = mujoco.MjData(m)
        self._adr = [m.jnt_qposadr[m.joint(j).id] for j in JOINT_NAMES]

    def __call__(self, q) -> np.ndarray:
        for a, v in zip(self._adr, q, strict=True):
            self._data.qpos[a] = v
        mujoco.mj_kinematics(self._sim.model, self._data)
        return self._data.site('tcp').xpos.copy()
