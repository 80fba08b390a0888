"""Capacity planning: how many robots one host carries, and how many instances N need.

The unit costs of a model pair are measured on this machine (``measure_compute``): the
world expert's forward at batch 1, 2, 4 and 8, the action expert's prepare (once per new
representation) and decode (every tick), the clamping gate's check of one chunk. What a
robot costs besides the models' arithmetic (its simulator and cameras, the nodes'
messages, executors and diagnostics) is measured by the caller from a fleet's processes
at two sizes, 1 and 2 robots on one action-expert instance (``RobotOverheads``: CPU
cores by role minus the compute above, split into what each added robot costs and what
the processes cost with none: ``overheads_from_two``). Measured from one robot alone,
each robot was charged its processes' fixed costs too: the planner then predicted 1.44
cores for 2 robots that used 1.04, and a capacity of 1 where 2 was measured
(2026-12-05).

The prediction follows the design documents' sizing rule, per expert:

    instances = peak rate / per-instance throughput * (1 + redundancy)

with the world expert's per-instance throughput at the batch its queue forms (frames
arriving while one batch encodes make up the next: b = max(1, rate * encode(b)), solved
as a fixed point over the measured batch sizes), and a host carries N robots while both
(1) every core-consuming role together stays within ``utilization`` of the host's cores
and (2) the world expert's encoder thread stays within ``thread_utilization`` of one
core (its queue, not the core count, sets the representation's latency; the same share
of its one clock thread sizes an action-expert instance). Ticks and encodes that wait
for a core turn into late or stale representations before the cores are 100 % busy,
hence budgets below 1. They come from the curves of 2026-12-03..06 (docs/benchmarks.md),
in the planner's own figures: sizes that were carried were planned at up to 0.81 of the
two cores (two views, N = 2, 2026-12-06: 1.62 cores planned, 1.49 measured, 0.0 %
degraded), the least planned size that was not carried at 1.03 (one view, N = 4,
2026-12-05: 2.06 planned, 1.91 measured, period p99 22.58 ms against 21). Hence 0.85,
nearer the carried side: a plan that says 2 where 3 would do is safe, the other way not.
Until 2026-12-06 the budget was 0.7, which predicted 1 where 2 were carried. The
encoder thread's 0.7: two views at N = 4 went stale with that thread ~0.72 busy (its
queue's batch 2.2-2.5 frames, stamp -> descriptor p99 61-71 ms), one view at N = 4
(~0.5 busy) degraded 0.0-1.1 % in three of four curves.

The model is checked against the robots the planner watched (``capacity_with_probes``):
a size its probes carried (at most 1 % of ticks degraded over the measured window, the
curve's degraded-tick limit) is carried whatever the model says, and one they did not carry bounds
the capacity below it. On a 2-core host whose capacity is
about 2, the probes of 1 and 2 robots decide most of the answer; the model decides the
sizes beyond them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

ROLES = ('world', 'action', 'harness', 'robots')
BATCHES = (1, 2, 4, 8)
HOST_UTILIZATION = 0.85  # share of the host's cores a plan may use (see above)
THREAD_UTILIZATION = 0.7  # share of one core a serving thread (the encoder, a clock) may use


@dataclass
class ComputeCosts:
    """Single-thread milliseconds of the models' and the gate's arithmetic."""

    encode_ms: dict[int, float]  # world forward at batch b (the whole batch)
    prepare_ms: float  # action expert, once per new representation
    decode_ms: float  # action expert, every tick
    gate_ms: float  # the clamping gate, one chunk
    views: int = 1


@dataclass
class RobotOverheads:
    """Cores per role beyond ``ComputeCosts``: ``cores`` for each robot, ``fixed`` for
    the role's processes whatever their robots (the action experts' once per instance,
    the others' once per host)."""

    cores: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ROLES, 0.0))
    fixed: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ROLES, 0.0))


@dataclass
class Plan:
    robots: int
    world_batch: float
    world_thread_load: float  # share of one core the encoder thread is busy
    cores: dict[str, float]  # by role
    total_cores: float
    world_instances: int
    action_instances: int
    fits: bool
    why_not: str = ''


def encode_at(costs: ComputeCosts, batch: float) -> float:
    """Encode ms of a batch of ``batch`` frames, interpolated over the measured sizes."""
    sizes = sorted(costs.encode_ms)
    return float(np.interp(batch, sizes, [costs.encode_ms[b] for b in sizes]))


def queue_batch(costs: ComputeCosts, frames_per_s: float, max_batch: int) -> float:
    """The batch the world expert's queue forms: the frames that arrive while one batch
    encodes (at least one, at most ``max_batch``), as a fixed point."""
    b = 1.0
    for _ in range(50):
        nxt = min(float(max_batch), max(1.0, frames_per_s * encode_at(costs, b) / 1e3))
        if abs(nxt - b) < 1e-3:
            break
        b = nxt
    return b


def plan(
    robots: int,
    costs: ComputeCosts,
    overheads: RobotOverheads,
    host_cores: float,
    camera_hz: float = 30.0,
    control_hz: float = 50.0,
    utilization: float = HOST_UTILIZATION,
    redundancy: float = 0.0,
    max_batch: int = 4,
    robots_per_instance: int = 2,
    thread_utilization: float = THREAD_UTILIZATION,
) -> Plan:
    """What ``robots`` robots cost on one host, and the instances they need
    (``robots_per_instance``: the layout they run in, for the instances' fixed cost)."""
    frames = robots * camera_hz
    b = queue_batch(costs, frames, max_batch)
    world_load = frames * encode_at(costs, b) / b / 1e3  # cores of the encoder thread
    per_robot = {
        'world': 0.0,
        'action': (camera_hz * costs.prepare_ms + control_hz * costs.decode_ms) / 1e3,
        'harness': control_hz * costs.gate_ms / 1e3,
        'robots': 0.0,
    }
    cores = {role: robots * (per_robot[role] + overheads.cores.get(role, 0.0)) for role in ROLES}
    cores['world'] += world_load
    layout = {'action': math.ceil(robots / max(1, robots_per_instance))}
    for role in ROLES:
        if robots:
            cores[role] += layout.get(role, 1) * overheads.fixed.get(role, 0.0)
    total = sum(cores.values())
    # the design documents' rule: peak rate / per-instance throughput * (1 + redundancy);
    # an instance's throughput is what its one thread does within its budget
    world_tput = thread_utilization * 1e3 * b / encode_at(costs, b)  # frames/s per instance
    action_tick_ms = costs.decode_ms + costs.prepare_ms * camera_hz / control_hz
    action_tput = thread_utilization * 1e3 / action_tick_ms  # robot ticks/s per instance
    world_inst = max(1, math.ceil(frames / world_tput * (1 + redundancy) - 1e-9))
    action_inst = max(1, math.ceil(robots * control_hz / action_tput * (1 + redundancy) - 1e-9))
    why = []
    if total > utilization * host_cores:
        why.append(f'{total:.2f} cores > {utilization:g} x {host_cores:g}')
    if world_load > thread_utilization:
        why.append(f'world encoder thread {world_load:.2f} of a core > {thread_utilization:g}')
    return Plan(
        robots,
        b,
        world_load,
        cores,
        total,
        world_inst,
        action_inst,
        not why,
        '; '.join(why),
    )


def host_capacity(costs: ComputeCosts, overheads: RobotOverheads, host_cores: float, **kw) -> int:
    """The most robots one host carries (0: not even one)."""
    n = 0
    while n < 256 and plan(n + 1, costs, overheads, host_cores, **kw).fits:
        n += 1
    return n


def largest_carried(carried: dict[int, bool]) -> int:
    """The largest size below the first one that missed (``carried``: size -> met the
    limits): a fleet grows one robot at a time, so a size past a failing one does not
    count. 0 when the smallest size missed."""
    n = 0
    for size in sorted(carried):
        if not carried[size]:
            break
        n = size
    return n


def capacity_with_probes(model_capacity: int, probes: dict[int, bool]) -> int:
    """The model's capacity checked against the sizes the planner ran (``probes``: size ->
    met the curve's limits): a probed size that was carried is carried whatever the model
    says, and the first probed size that missed bounds the capacity below it."""
    seen = largest_carried(probes)
    missed = [n for n in sorted(probes) if not probes[n]]
    n = max(model_capacity, seen)
    return min(n, missed[0] - 1) if missed else n


def overheads_from_two(
    one: dict[str, float],
    two: dict[str, float],
    costs: ComputeCosts,
    camera_hz: float = 30.0,
    control_hz: float = 50.0,
) -> RobotOverheads:
    """Overheads from measured runs of 1 and 2 robots on one instance: what the second
    robot added beyond its compute is each robot's cost, what is left of the first
    robot's run the processes' fixed cost (never below zero)."""
    residual = {}
    for n, measured in ((1, one), (2, two)):
        model = plan(n, costs, RobotOverheads(), math.inf, camera_hz, control_hz)
        residual[n] = {role: measured.get(role, 0.0) - model.cores[role] for role in ROLES}
    per_robot = {role: max(0.0, residual[2][role] - residual[1][role]) for role in ROLES}
    fixed = {role: max(0.0, residual[1][role] - per_robot[role]) for role in ROLES}
    return RobotOverheads(per_robot, fixed)


def _best_ms(fn, repeats: int) -> float:
    """Median single-call milliseconds of ``fn`` (after one untimed call)."""
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.thread_time()
        fn()
        samples.append((time.thread_time() - t0) * 1e3)
    return float(np.median(samples))


def measure_compute(world, action, gate, frames, repeats: int = 40, log=print) -> ComputeCosts:
    """Unit costs of a loaded pair (``world``, ``action``: the experts; ``gate``: a
    ClampGate for the robot; ``frames``: at least 8 HxWx3 uint8 camera frames) in CPU
    time of this thread, torch at one intra-op thread as the nodes run it."""
    import torch

    from ..models.contract import Observation

    torch.set_num_threads(1)
    views = world.spec.view_names
    obs = [Observation(dict.fromkeys(views, f)) for f in frames[: max(BATCHES)]]
    encode = {}
    with torch.inference_mode():
        for b in BATCHES:
            encode[b] = _best_ms(lambda b=b: world.encode_batch(obs[:b]), repeats)
            log(f'  world encode, batch {b}: {encode[b]:.2f} ms')
        rep = torch.from_numpy(world.encode(obs[0])).unsqueeze(0).to(action.dtype)
        joints = torch.zeros(1, len(action.spec.joint_names), dtype=action.dtype)
        cond = torch.zeros(1, action.spec.conditioning_dim, dtype=action.dtype)
        prepare = _best_ms(lambda: action.prepare(rep), repeats)
        prepared = action.prepare(rep)
        decode = _best_ms(lambda: action.decode(prepared, joints, cond), repeats)
        chunk = action.decode(prepared, joints, cond)[0].float().numpy().astype(np.float64)
    log(f'  action prepare {prepare:.2f} ms, decode {decode:.2f} ms')
    times = np.arange(1, chunk.shape[0] + 1) * gate.period_s
    names, current = gate.joint_names, chunk[0]
    gate_ms = _best_ms(lambda: gate.apply(names, chunk, times, current), repeats * 5)
    log(f'  gate check of one chunk {gate_ms:.3f} ms')
    return ComputeCosts(encode, prepare, decode, gate_ms, len(views))
