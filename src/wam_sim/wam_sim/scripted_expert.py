"""Scripted pick-and-place expert for the tabletop sim: IK waypoints -> joint trajectories.

It proves the task is solvable and is what behaviour cloning learns from. It only
commands the robot through its joint-trajectory interface (``TabletopSim.command``),
like a policy would; it reads privileged state (object positions) to decide.
IK: damped least squares on the TCP site, position plus a top-down orientation
(gripper axis pointing down, fingers across the approach direction).
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from wam_core.common.robot import TABLETOP_ARM
from wam_core.control.command_tracker import CommandTracker
from wam_core.control.limits import ChunkRejected, ClampGate

from .tabletop import FRIDGE_HALF, JOINT_NAMES, TABLE_Z, TabletopSim

OPEN, CLOSED = 0.04, 0.0


def _target_rotation(yaw: float) -> np.ndarray:
    x = np.array([0.0, 0.0, -1.0])  # gripper axis points down
    y = np.array([-math.sin(yaw), math.cos(yaw), 0.0])  # fingers open across the approach
    return np.column_stack([x, y, np.cross(x, y)])


def solve_ik(sim: TabletopSim, pos, yaw: float, q0, iters: int = 150) -> np.ndarray:
    """Joint positions (6 arm joints) putting the TCP at pos, gripper down, rotated by yaw."""
    m = sim.model
    d = mujoco.MjData(m)
    d.qpos[:] = sim.data.qpos
    adr = [m.jnt_qposadr[m.joint(j).id] for j in JOINT_NAMES[:6]]
    dof = [m.jnt_dofadr[m.joint(j).id] for j in JOINT_NAMES[:6]]
    for a, v in zip(adr, q0[:6], strict=True):
        d.qpos[a] = v
    site = m.site('tcp').id
    lo = np.array([TABLETOP_ARM.limits[j].lower for j in JOINT_NAMES[:6]])
    hi = np.array([TABLETOP_ARM.limits[j].upper for j in JOINT_NAMES[:6]])
    r_target = _target_rotation(yaw)
    jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    for _ in range(iters):
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        err_p = np.asarray(pos) - d.site_xpos[site]
        r = d.site_xmat[site].reshape(3, 3)
        e = r_target @ r.T  # rotation error as an axis-angle vector
        err_r = 0.5 * np.array([e[2, 1] - e[1, 2], e[0, 2] - e[2, 0], e[1, 0] - e[0, 1]])
        err = np.concatenate([err_p, 0.5 * err_r])
        if np.linalg.norm(err_p) < 1e-4 and np.linalg.norm(err_r) < 1e-3:
            break
        mujoco.mj_jacSite(m, d, jacp, jacr, site)
        jac = np.vstack([jacp[:, dof], 0.5 * jacr[:, dof]])
        dq = jac.T @ np.linalg.solve(jac @ jac.T + 1e-4 * np.eye(6), err)
        for i, (a, v) in enumerate(zip(adr, dq, strict=True)):
            d.qpos[a] = np.clip(d.qpos[a] + v, lo[i], hi[i])
    return np.array([d.qpos[a] for a in adr])


# ---- state-feedback expert ---------------------------------------------------------
# Behaviour cloning needs an expert whose action is a function of the current state
# (what the policy sees), not of the time since the episode began: a time-indexed plan
# has stationary moments (ease-in from rest, waiting for the gripper) where the same
# state is labelled both "wait" and "go", and a cloned policy stalls there. This
# expert computes its waypoint from the state, so equal states always get equal
# labels, and a perturbed state gets a label that corrects it (which the
# noise-injected episodes record).
#
# The waypoint is also a *continuous* function of the state wherever it can be: the
# TCP descends over the apple in proportion to how well it is aligned (a funnel), the
# carried apple moves towards the fridge as it clears the table, and is lowered as it
# comes over the fridge. An earlier expert switched between waypoints on thresholds
# ("aligned within 2 cm: descend"); a regression policy blurs such switches, and even
# one given the true object positions, but not the phase, missed the waypoint by 8-11 cm
# in the descend and lift phases (0.6 cm when told the phase). The only switches left
# are the gripper's, and they read the gripper opening, which is in the joint state.

GRASP_Z = TABLE_Z + 0.04  # TCP height; the fingertips reach 4 cm below it
PREGRASP_DZ = 0.12
CARRY_Z = TABLE_Z + 0.17
PLACE_Z = TABLE_Z + 0.085
RETREAT_Z = TABLE_Z + 0.20
ARM_SPEED = 1.0  # rad/s, fastest joint
GRIP_SPEED = 0.1  # m/s
LEAD_S = 0.1  # command this far ahead of the measured state (PD tracking lag)
FUNNEL_XY = (
    0.008,
    0.035,
)  # horizontal TCP-apple distance (m): at grasp height .. at pre-grasp height
CLOSE_XY, Z_TOL = 0.012, 0.012  # the gripper closes within these of the grasp pose
LIFTED_Z = (TABLE_Z + 0.03, TABLE_Z + 0.07)  # apple height: transport starts .. at full stride
LOWER_XY = (0.01, 0.05)  # TCP-fridge distance: at place height .. at carry height
CARROT_M = 0.08  # transport aims this far ahead of the TCP
GRASPED_BELOW = 0.0225  # gripper opening (m) once the fingers close on the 4 cm cube
RELEASED_ABOVE = (
    0.025,
    0.037,
)  # gripper opening while releasing: at place height .. at retreat height

FREE_SPACE = ('reach', 'lift', 'transport', 'retreat')
PHASE_SKILL = {  # expert phase -> the plan skill it carries out (subtask conditioning)
    'reach': 'locate',
    'descend': 'grasp',
    'close': 'grasp',
    'lift': 'transport',
    'transport': 'transport',
    'lower': 'place',
    'release': 'release',
    'retreat': 'release',
}


def apple_in_fridge(sim: TabletopSim) -> bool:
    apple, fridge = sim.body_position('apple'), sim.body_position('fridge')
    return bool(
        np.all(np.abs(apple[:2] - fridge[:2]) < FRIDGE_HALF - 0.01) and apple[2] < TABLE_Z + 0.11
    )


def _ramp(x: float, lo: float, hi: float) -> float:
    """0 at or below lo, 1 at or above hi, linear between."""
    return float(np.clip((x - lo) / (hi - lo), 0.0, 1.0))


class ScriptedExpert:
    """Pick-and-place as a state-feedback law: ``act(sim)`` -> (phase, chunk [H, 7])."""

    def __init__(self, sim: TabletopSim, chunk: int = 16, period_s: float = 0.02):
        self.sim, self.chunk, self.period_s = sim, chunk, period_s
        self._ik_cache = {}

    def _ik(self, pos, yaw: float, q) -> np.ndarray:
        key = (tuple(np.round(pos, 3)), round(yaw, 3))  # waypoints repeat tick after tick
        if key not in self._ik_cache:
            if len(self._ik_cache) > 256:
                self._ik_cache.clear()
            self._ik_cache[key] = solve_ik(self.sim, pos, yaw, q)
        return self._ik_cache[key]

    def phase(self):
        """(phase name, arm waypoint [6], gripper target). The name is bookkeeping (the
        recorded subtask); the waypoint is computed without it."""
        sim = self.sim
        q, tcp = sim.joint_positions(), sim.tcp_position()
        apple, fridge = sim.body_position('apple'), sim.body_position('fridge')
        grip = q[6]
        yaw_a, yaw_f = math.atan2(apple[1], apple[0]), math.atan2(fridge[1], fridge[0])
        near_apple = np.linalg.norm(apple - tcp) < 0.05  # held: ~2 cm below the TCP, swinging
        if apple_in_fridge(sim):  # open, and rise as the fingers open
            z = PLACE_Z + (RETREAT_Z - PLACE_Z) * _ramp(grip, *RELEASED_ABOVE)
            name = 'release' if grip < 0.035 and near_apple else 'retreat'
            return name, self._ik([fridge[0], fridge[1], z], yaw_f, q), OPEN
        if GRASPED_BELOW > grip > 0.008 and near_apple:
            lifted = _ramp(apple[2], *LIFTED_Z)
            to_fridge = fridge[:2] - tcp[:2]
            d_fridge = np.linalg.norm(to_fridge)
            # a Cartesian carrot at carry height (a joint-space line to a far pose would
            # dip), its stride growing as the apple clears the table: straight up first
            xy = tcp[:2] + to_fridge * min(1.0, CARROT_M / max(d_fridge, 1e-9)) * lifted
            z = PLACE_Z + (CARRY_Z - PLACE_Z) * _ramp(d_fridge, *LOWER_XY)
            name = 'lift' if lifted < 1.0 else 'lower' if d_fridge < LOWER_XY[1] else 'transport'
            return name, self._ik([xy[0], xy[1], z], math.atan2(xy[1], xy[0]), q), CLOSED
        d_apple = np.linalg.norm(tcp[:2] - apple[:2])
        z = GRASP_Z + PREGRASP_DZ * _ramp(d_apple, *FUNNEL_XY)
        arm = self._ik([apple[0], apple[1], z], yaw_a, q)
        if d_apple < CLOSE_XY and abs(tcp[2] - GRASP_Z) < Z_TOL and grip > 0.008:
            return 'close', arm, CLOSED
        return ('descend' if d_apple < FUNNEL_XY[1] else 'reach'), arm, OPEN

    def act(self):
        """The expert's chunk from the current state: point k is the target k periods from now."""
        name, arm, grip_target = self.phase()
        q = self.sim.joint_positions()
        goal = q.copy()
        goal[:6] = arm
        goal[6] = grip_target
        delta = goal - q
        t_arm = np.max(np.abs(delta[:6])) / ARM_SPEED
        t_grip = abs(delta[6]) / GRIP_SPEED
        t_total = max(t_arm, t_grip, 1e-6)
        # straight line in joint space, every joint arriving together, led by LEAD_S
        t = LEAD_S + self.period_s * np.arange(self.chunk)
        frac = np.clip(t / t_total, 0.0, 1.0)[:, None]
        return name, q + frac * delta


def run_episode(
    sim: TabletopSim,
    seed: int,
    period_s: float = 0.02,
    chunk: int = 16,
    max_s: float = 15.0,
    noise: float = 0.0,
    on_tick=None,
    driver=None,
) -> tuple[bool, float]:
    """Run the expert closed-loop at the control period; returns (success, seconds).

    Chunks pass the robot's clamping gate, based on the last command, as the harness
    does. noise > 0 adds a smooth random offset (rad, arm joints) to what is executed, not to
    what the expert says: recorded episodes then show how to recover from errors.
    ``on_tick(sim, phase, chunk)`` is called before each command (dataset recording).
    ``driver(sim)`` may return the chunk to execute instead of the expert's (None: the
    expert's): DAgger records the expert's labels on the states a learned policy visits.
    """
    sim.reset(seed)
    sim.step(0.2)  # let the objects settle
    expert = ScriptedExpert(sim, chunk, period_s)
    gate = ClampGate(JOINT_NAMES, TABLETOP_ARM.limits, period_s)  # as the harness forwards
    tracker = CommandTracker()
    rng = np.random.default_rng(seed + 7919)
    offset = np.zeros(7)
    t0 = sim.time
    done_at = None
    times = period_s * np.arange(chunk)
    while sim.time - t0 < max_s:
        name, pts = expert.act()
        if on_tick is not None:
            on_tick(sim, name, pts)
        driven = driver(sim) if driver is not None else None
        if driven is not None:
            pts = driven
        if noise > 0 and name in FREE_SPACE:
            offset[:6] = 0.97 * offset[:6] + noise * 0.25 * rng.standard_normal(
                6
            )  # ~ +-noise, ~1 s correlation
        else:
            offset *= 0.8  # no noise near contact: grasps stay clean
        base, vel = tracker.baseline(sim.time, sim.joint_positions())
        try:
            cmd = gate.apply(JOINT_NAMES, pts + offset, times, base, vel).positions
            tracker.record(sim.time, times, cmd)
            sim.command(JOINT_NAMES, cmd[1:], times[1:])  # point 0 is "now": already past
        except ChunkRejected:
            pass  # the robot finishes the last chunk
        sim.step(period_s)
        if name == 'retreat' and sim.success():
            done_at = done_at or sim.time
            if sim.time - done_at > 0.5:
                break
    return sim.success(), sim.time - t0


def main(argv=None) -> int:
    """python -m wam_sim.scripted_expert [--episodes 100] [--first-seed 1000]"""
    import argparse
    import sys
    import time

    ap = argparse.ArgumentParser(
        description='Scripted pick-and-place success rate over seeded episodes'
    )
    ap.add_argument('--episodes', type=int, default=100)
    ap.add_argument('--first-seed', type=int, default=1000)
    args = ap.parse_args(argv)
    sim = TabletopSim(render=False)
    t0 = time.perf_counter()
    ok = 0
    for i in range(args.episodes):
        ok += run_episode(sim, args.first_seed + i)[0]
        print(
            f'\repisode {i + 1}/{args.episodes}: {ok} successes',
            end='',
            file=sys.stderr,
            flush=True,
        )
    print(file=sys.stderr)
    print(
        f'scripted expert: {ok}/{args.episodes} = {ok / args.episodes:.2f} success '
        f'({time.perf_counter() - t0:.0f} s)'
    )
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
