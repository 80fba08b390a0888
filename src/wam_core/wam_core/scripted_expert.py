"""Scripted pick-and-place expert for the tabletop sim: IK waypoints -> joint trajectories.

It proves the task is solvable and is what behaviour cloning learns from. It only
uses the robot's command interface (``TabletopSim.command``), like a policy would.
IK: damped least squares on the TCP site, position plus a top-down orientation
(gripper axis pointing down, fingers across the approach direction).
"""
from __future__ import annotations

import math
from typing import List, Tuple

import mujoco
import numpy as np

from .sim import JOINT_NAMES, TABLE_Z, TabletopSim

OPEN, CLOSED = 0.04, 0.0


def _target_rotation(yaw: float) -> np.ndarray:
    x = np.array([0.0, 0.0, -1.0])                       # gripper axis points down
    y = np.array([-math.sin(yaw), math.cos(yaw), 0.0])   # fingers open across the approach
    return np.column_stack([x, y, np.cross(x, y)])


def solve_ik(sim: TabletopSim, pos, yaw: float, q0, iters: int = 150) -> np.ndarray:
    """Joint positions (6 arm joints) putting the TCP at pos, gripper down, rotated by yaw."""
    m = sim.model
    d = mujoco.MjData(m)
    d.qpos[:] = sim.data.qpos
    adr = [m.jnt_qposadr[m.joint(j).id] for j in JOINT_NAMES[:6]]
    dof = [m.jnt_dofadr[m.joint(j).id] for j in JOINT_NAMES[:6]]
    for a, v in zip(adr, q0[:6]):
        d.qpos[a] = v
    site = m.site('tcp').id
    r_target = _target_rotation(yaw)
    jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    for _ in range(iters):
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        err_p = np.asarray(pos) - d.site_xpos[site]
        r = d.site_xmat[site].reshape(3, 3)
        e = r_target @ r.T                                 # rotation error as an axis-angle vector
        err_r = 0.5 * np.array([e[2, 1] - e[1, 2], e[0, 2] - e[2, 0], e[1, 0] - e[0, 1]])
        err = np.concatenate([err_p, 0.5 * err_r])
        if np.linalg.norm(err_p) < 1e-4 and np.linalg.norm(err_r) < 1e-3:
            break
        mujoco.mj_jacSite(m, d, jacp, jacr, site)
        jac = np.vstack([jacp[:, dof], 0.5 * jacr[:, dof]])
        dq = jac.T @ np.linalg.solve(jac @ jac.T + 1e-4 * np.eye(6), err)
        for a, v in zip(adr, dq):
            d.qpos[a] = np.clip(d.qpos[a] + v, -2.9, 2.9)
    return np.array([d.qpos[a] for a in adr])


def plan_pick_and_place(sim: TabletopSim) -> List[Tuple[float, np.ndarray]]:
    """(duration s, 7 joint targets) segments for: above, down, close, lift, over, down, open, up."""
    apple = sim.body_position('apple')
    fridge = sim.body_position('fridge')
    grasp_z = TABLE_Z + 0.02
    yaw_a = math.atan2(apple[1], apple[0])
    yaw_f = math.atan2(fridge[1], fridge[0])
    q = sim.joint_positions()
    segments = []

    def go(p, yaw, grip, duration):
        nonlocal q
        arm = solve_ik(sim, p, yaw, q)
        q = np.concatenate([arm, [grip]])
        segments.append((duration, q.copy()))

    go(apple + [0, 0, 0.12], yaw_a, OPEN, 1.5)
    go([apple[0], apple[1], grasp_z + 0.005], yaw_a, OPEN, 1.0)
    go([apple[0], apple[1], grasp_z + 0.005], yaw_a, CLOSED, 0.6)
    go([apple[0], apple[1], grasp_z + 0.15], yaw_a, CLOSED, 1.0)
    go([fridge[0], fridge[1], grasp_z + 0.15], yaw_f, CLOSED, 1.5)
    go([fridge[0], fridge[1], grasp_z + 0.06], yaw_f, CLOSED, 0.8)
    go([fridge[0], fridge[1], grasp_z + 0.06], yaw_f, OPEN, 0.5)
    go([fridge[0], fridge[1], grasp_z + 0.18], yaw_f, OPEN, 0.8)
    return segments


def run_episode(sim: TabletopSim, seed: int, period_s: float = 0.02, chunk: int = 16) -> Tuple[bool, float]:
    """Execute the scripted plan as chunked joint trajectories; returns (success, seconds)."""
    sim.reset(seed)
    sim.step(0.2)                                   # let the objects settle
    segments = plan_pick_and_place(sim)
    # dense reference trajectory at the control period
    ref, q = [], sim.joint_positions()
    for duration, target in segments:
        n = max(1, int(round(duration / period_s)))
        for k in range(1, n + 1):
            ref.append(q + (target - q) * (0.5 - 0.5 * math.cos(math.pi * k / n)))   # smooth start/stop
        q = target
    ref = np.array(ref)
    t0 = sim.time
    for i in range(len(ref)):
        pts = ref[i:i + chunk]
        sim.command(JOINT_NAMES, pts, period_s * np.arange(1, len(pts) + 1))
        sim.step(period_s)
    sim.step(1.0)
    return sim.success(), sim.time - t0


def main(argv=None) -> int:
    """python -m wam_core.scripted_expert [--episodes 100] [--first-seed 1000]"""
    import argparse
    import sys
    import time
    ap = argparse.ArgumentParser(description='Scripted pick-and-place success rate over seeded episodes')
    ap.add_argument('--episodes', type=int, default=100)
    ap.add_argument('--first-seed', type=int, default=1000)
    args = ap.parse_args(argv)
    sim = TabletopSim(render=False)
    t0 = time.perf_counter()
    ok = 0
    for i in range(args.episodes):
        ok += run_episode(sim, args.first_seed + i)[0]
        print(f'\repisode {i + 1}/{args.episodes}: {ok} successes', end='', file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f'scripted expert: {ok}/{args.episodes} = {ok / args.episodes:.2f} success '
          f'({time.perf_counter() - t0:.0f} s)')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
