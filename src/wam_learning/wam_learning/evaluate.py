"""Closed-loop evaluation of the policy without ROS: the reference the stack is compared to.

Two ways of running the same experts on held-out seeded episodes of the sim:

- ``direct``: the policy called in-process, no ROS, no cache. A world-expert call on
  each new camera frame (30 Hz), the action expert on every 50 Hz tick; the simulation
  waits for the computation, so this is the policy with zero serving latency.
- ``unified``: the serving baseline without the split. Every 50 Hz tick runs the world
  expert on the latest frame and then the action expert, and the simulation does *not*
  wait: the robot keeps executing the previous chunk for the measured compute time,
  and a tick that overruns the 20 ms period delays the next one, as on a real robot.

Both shape chunks as the action expert does (``ChunkStream``: stamped one period ahead,
blended, bounded, with velocities, hold_last_action), send them through the same
clamping gate (the harness's limits) and the same joint-trajectory semantics as the ROS
stack, and condition on the plan's subtasks advancing every ``subtask_s`` as the harness
does. ``motion='legacy'`` runs the motion path as it was before chunk shaping (raw
positions, point 0 "now", linear interpolation), the yardstick for the smoothness
figures. Every episode records the commanded setpoint's jerk, the velocity jump at each
chunk boundary and how much the gate changed (``MotionFigures``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from wam_core.common.robot import TABLETOP_ARM
from wam_core.control.command_tracker import CommandTracker
from wam_core.control.limits import ChunkRejected, ClampGate, GateActivity
from wam_core.control.trajectory import point_velocities
from wam_core.models.action_expert import load_action_expert
from wam_core.models.contract import Observation
from wam_core.models.precision import resolve_precision
from wam_core.models.world_expert import WorldExpert
from wam_core.serving.chunk_stream import ChunkStream
from wam_sim.tabletop import JOINT_NAMES, MotionLog, TabletopSim

EVAL_EPISODES = 50
SUCCESS_HOLD_S = 0.5  # the apple must stay in the fridge this long
MAX_EPISODE_S = 25.0
SETTLE_S = 0.2


@dataclass
class EpisodeResult:
    seed: int
    success: bool
    time_to_success_s: float | None
    ticks: int = 0
    degraded_ticks: int = 0  # ticks that sent nothing new (overrun, rejected chunk)
    compute_ms: list[float] = field(default_factory=list)
    motion: dict = field(default_factory=dict)  # motion_figures() of the episode


def gate_tolerances() -> list[float]:
    return [TABLETOP_ARM.change_tolerance(j) for j in JOINT_NAMES]


def motion_figures(log: MotionLog, activity: GateActivity) -> dict:
    """One episode's smoothness and gate figures: jerk RMS/max (arm joints, rad/s^3), the
    velocity jumps at chunk boundaries (rad/s, max over the arm joints), and the share of
    commands the gate changed by more than the tolerance with its largest change."""
    summary = activity.summary()
    return {
        **log.figures(),
        'gate_changed_share': activity.overall_share(),
        'gate_change_max': max((a['max'] for a in summary.values()), default=0.0),
        'gate_points': activity.points,
    }


def aggregate_motion(results) -> dict:
    """Over episodes: mean jerk RMS, max jerk, p99 boundary jump, gate change share/max."""
    figs = [r.motion for r in results if r.motion]
    if not figs:
        return {}
    rms = [f['jerk_rms'] for f in figs if f['jerk_rms'] is not None]
    jumps = np.concatenate([f['boundary_jumps'] for f in figs] + [[]])
    points = sum(f['gate_points'] for f in figs)
    return {
        'jerk_rms': float(np.mean(rms)) if rms else None,
        'jerk_max': max((f['jerk_max'] for f in figs if f['jerk_max'] is not None), default=None),
        'boundary_velocity_jump_p99': float(np.percentile(jumps, 99)) if jumps.size else None,
        'gate_changed_share': sum(f['gate_changed_share'] * f['gate_points'] for f in figs)
        / max(points, 1),
        'gate_change_max': max(f['gate_change_max'] for f in figs),
    }


class SuccessWatch:
    """Success = the apple stays in the fridge for SUCCESS_HOLD_S; reports when it first got
    there."""

    def __init__(self):
        self.since: float | None = None

    def update(self, t: float, ok: bool) -> bool:
        if not ok:
            self.since = None
            return False
        if self.since is None:
            self.since = t
        return t - self.since >= SUCCESS_HOLD_S


def subtask_vectors(instruction: str) -> list[np.ndarray]:
    """The rule plan's subtask embeddings, in order (what the harness publishes)."""
    from wam_core.planning.embedding import SubtaskEmbedder
    from wam_core.planning.rules import RulePlanner

    emb = SubtaskEmbedder()
    return [
        emb.embed(s.text()).astype(np.float32) for s in RulePlanner().plan(instruction).subtasks
    ]


class Policy:
    def __init__(
        self,
        world_dir: str,
        action_dir: str,
        instruction: str = 'put the red apple in the fridge',
        precision: str = 'auto',
        subtask_s: float = 2.0,
        period_s: float = 0.02,
        world_precision: str | None = None,
    ):
        # the world expert at its own precision, resolved by it ('auto': int8 on a CPU)
        self.world = WorldExpert(world_dir, precision=world_precision or precision)
        p = resolve_precision(precision)
        self.action, manifest = load_action_expert(action_dir, precision=p)
        if manifest.extra.get('world_version') not in (None, self.world.version):
            raise ValueError(
                f'action expert pairs with world version {manifest.extra.get("world_version")!r}, '
                f'not {self.world.version!r}'
            )
        self.dtype = next(self.action.parameters()).dtype
        self.subtasks = [
            torch.from_numpy(v).to(self.dtype)[None] for v in subtask_vectors(instruction)
        ]
        self.subtask_s, self.period_s = subtask_s, period_s
        self.gate = ClampGate(JOINT_NAMES, TABLETOP_ARM.limits, period_s)
        self.times = period_s * np.arange(self.action.config.chunk_size)

    def subtask(self, elapsed: float) -> torch.Tensor:
        return self.subtasks[min(int(elapsed / self.subtask_s), len(self.subtasks) - 1)]

    def observe(self, sim: TabletopSim) -> Observation:
        """Every view the world expert needs, rendered from the sim as it is now."""
        return Observation({v: sim.render(v) for v in self.world.spec.view_names})

    def encode(self, observation: Observation | np.ndarray):
        rep = torch.from_numpy(self.world.encode(observation)).unsqueeze(0).to(self.dtype)
        return self.action.prepare(rep)

    def decode(self, scene, q: np.ndarray, elapsed: float) -> np.ndarray:
        joint = torch.from_numpy(q.astype(np.float32))[None].to(self.dtype)
        return self.action.decode(scene, joint, self.subtask(elapsed))[0].float().numpy()


@torch.inference_mode()
def run_episode(
    sim: TabletopSim,
    policy: Policy,
    seed: int,
    mode: str = 'direct',
    camera_hz: float = 30.0,
    max_s: float = MAX_EPISODE_S,
    motion: str = 'shaped',
) -> EpisodeResult:
    if mode not in ('direct', 'unified'):
        raise ValueError(f'mode must be direct or unified, not {mode!r}')
    if motion not in ('shaped', 'legacy'):
        raise ValueError(f'motion must be shaped or legacy, not {motion!r}')
    sim.reset(seed)
    sim.step(SETTLE_S)
    period = policy.period_s
    t0 = sim.time
    res = EpisodeResult(seed, False, None)
    watch = SuccessWatch()
    tracker = CommandTracker()  # the gate's, as in the harness
    stream = ChunkStream(JOINT_NAMES, TABLETOP_ARM.limits, period)  # the action expert's
    activity = GateActivity(JOINT_NAMES, gate_tolerances())
    sim.motion_log = log = MotionLog()
    frame, next_frame, scene = None, t0, None
    while sim.time - t0 < max_s:
        now = sim.time
        new_frame = now >= next_frame - 1e-9
        if new_frame:
            frame = policy.observe(sim)
            next_frame += 1.0 / camera_hz
        q = sim.joint_positions()
        tic = time.perf_counter()
        if mode == 'direct':
            if new_frame:
                scene = policy.encode(frame)
        else:
            scene = policy.encode(frame)  # the world expert inside every tick
        chunk = policy.decode(scene, q, now - t0)
        compute = time.perf_counter() - tic
        res.compute_ms.append(compute * 1e3)
        res.ticks += 1
        if mode == 'unified':
            sim.step(compute)  # the robot runs on while the tick computes
        try:
            if motion == 'legacy':
                times, start, velocities = policy.times, sim.time, None
            else:
                traj = stream.chunk(chunk, now, 1, q)
                chunk, times, start, velocities = (
                    traj.positions,
                    traj.times,
                    traj.start,
                    traj.velocities,
                )
            base, vel = tracker.baseline(start, sim.joint_positions())
            gated = policy.gate.apply(JOINT_NAMES, chunk, times, base, vel)
            activity.add(gated.change)
            if velocities is not None and np.max(gated.change) > 1e-9:
                # the gate moved a point: the velocities describe what it forwards, as the
                # harness does
                velocities = point_velocities(gated.times, gated.positions, vel)
            tracker.record(start, times, gated.positions, velocities)
            if motion == 'legacy':  # point 0 is "now"
                sim.command(JOINT_NAMES, gated.positions[1:], times[1:])
            else:
                sim.command(JOINT_NAMES, gated.positions, times, start, velocities)
        except ChunkRejected:
            res.degraded_ticks += 1
        if mode == 'unified':
            # a 50 Hz timer: the next tick fires at the next period boundary after this one ends
            ticks_used = max(1, math.ceil(compute / period - 1e-9))
            res.degraded_ticks += ticks_used - 1
            sim.step(ticks_used * period - compute)
        else:
            sim.step(period)
        if watch.update(sim.time, sim.success()):
            res.success, res.time_to_success_s = True, watch.since - t0
            break
    sim.motion_log = None
    res.motion = motion_figures(log, activity)
    return res


def summarise(results: list[EpisodeResult]) -> dict[str, float]:
    ok = [r for r in results if r.success]
    compute = np.concatenate([r.compute_ms for r in results] + [[np.nan]])
    return {
        'episodes': len(results),
        'successes': len(ok),
        'success_rate': len(ok) / max(1, len(results)),
        'mean_time_to_success_s': float(np.mean([r.time_to_success_s for r in ok]))
        if ok
        else None,
        'ticks': int(sum(r.ticks for r in results)),
        'degraded_ticks': int(sum(r.degraded_ticks for r in results)),
        'compute_ms_p50': float(np.nanpercentile(compute, 50)) if len(compute) > 1 else None,
        'compute_ms_p99': float(np.nanpercentile(compute, 99)) if len(compute) > 1 else None,
        'failed_seeds': [r.seed for r in results if not r.success],
        'motion': aggregate_motion(results),
    }


def evaluate(
    policy: Policy, seeds: list[int], mode: str, progress: bool = True, motion: str = 'shaped'
) -> dict[str, float]:
    import sys

    from tqdm import tqdm

    sim = TabletopSim()
    results = []
    label = mode if motion == 'shaped' else f'{mode} ({motion} motion)'
    bar = tqdm(seeds, desc=f'{label} policy', unit='ep', disable=not progress, file=sys.stderr)
    try:
        for seed in bar:
            results.append(run_episode(sim, policy, seed, mode, motion=motion))
            bar.set_postfix(success=f'{sum(r.success for r in results)}/{len(results)}')
    finally:
        sim.close()
    return summarise(results)
