"""Action-expert serving logic: one 50 Hz tick against the representation cache.

Per tick: read the newest usable representation (version, TTL, seqlock), reuse
its prepared scene state (the object positions the action expert reads off it) if
it is the one already prepared, decode a chunk from
the latest joint state and subtask vector. When nothing usable is there, the tick is
*degraded* and says why; no chunk is ever computed from an unusable representation
(what the robot does then is ``chunk_stream``'s hold_last_action). Never waits for
the world expert; buffers are allocated once. Inputs arrive on the executor's threads
and the tick runs on its own: the joint state is swapped under a lock, so a tick never
reads half of one state and half of the next.

A model trained at another control period (a 15 Hz or 30 Hz policy on a 50 Hz loop) has
its chunk resampled onto the control period here (``resample_chunk``), so everything
downstream sees rows one control period apart. An action expert slower than a period
runs the same computation off the tick (``off_tick_decoder``); ``timeout_ms`` is then
infinite.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import torch

from ..cache.protocol import ReadResult
from ..control.resample import resample_chunk

# Cache arrays are read-only views (shared with the writer or mapped PROT_READ);
# the model only reads them under inference_mode, so torch's warning is moot.
warnings.filterwarnings('ignore', message='The given NumPy array is not writable')


@dataclass
class Descriptor:
    """The fields of a RepresentationDescriptor the reader needs."""

    key: str
    model_version: str
    slot: int
    epoch: int = 0


@dataclass
class TickResult:
    kind: str  # 'chunk' | 'degraded'
    positions: np.ndarray | None  # [H, N] for a chunk, None when degraded
    reason: str = ''
    repr_key: str = ''
    repr_age_ms: float = float('nan')
    obs_stamp_ns: int = 0
    stages: dict[str, float] = field(default_factory=dict)
    new_representation: bool = False  # the first chunk computed from this representation


@dataclass
class PendingDecode:
    """A tick between ``begin`` and ``finish``: the scene to decode from and what the tick
    read. ``decode_started``: perf_counter s when its decode began (a batched decode's
    forward is shared: each robot's forward stage shows the whole of it)."""

    scene: object
    res: ReadResult
    fresh: bool
    t0: float
    stages: dict[str, float]
    decode_started: float = 0.0


def representation_tensor(array, dtype: str) -> torch.Tensor:
    """A cache's array as a torch tensor, no copy: a numpy view (bfloat16 is stored as its
    16-bit words and viewed as bfloat16 again), or the tensor a cuda_ipc ring gives."""
    if isinstance(array, torch.Tensor):
        return array
    t = torch.from_numpy(array)
    return t.view(torch.bfloat16) if dtype == 'bfloat16' else t


@dataclass
class ServedModel:
    """An action expert a ticker can serve: the model, the world version it accepts, and
    the caller's name for it (a release)."""

    model: object
    version: str
    tag: str = ''


class ActionTicker:
    def __init__(
        self,
        model,
        cache,
        version: str,
        num_joints: int,
        subtask_dim: int,
        timeout_ms: float = 15.0,
        period_s: float | None = None,
    ):
        """``period_s``: the control period; a model trained at another one has its chunks
        resampled onto it (None: the model's own)."""
        self.cache = cache
        self.timeout_ms = timeout_ms
        self._period_s = period_s
        self._install(model, version, num_joints, subtask_dim)
        self._joint_np: np.ndarray | None = None
        self._pending_joint: np.ndarray | None = None
        self._pending_subtask: torch.Tensor | None = None
        self._input_lock = threading.Lock()
        self._descriptor: Descriptor | None = None
        self.ticks = 0
        self.chunks = 0
        self.prepares = 0  # scene-state computations (once per representation)
        self.degraded: dict[str, int] = {}
        # A release switch (``arm``): the next model waits here, loaded and warm, until the
        # first representation of the world version it accepts; the model it replaced
        # stays (``previous``) until the switch is confirmed, so switching back needs no load.
        self.tag = ''  # the caller's name for the model served (its release)
        self._armed: ServedModel | None = None
        self.previous: ServedModel | None = None
        self.switches = 0
        self.switched_at_ns = 0  # wall clock of the last switch's first tick
        # the last switch's degraded ticks by reason, from its arm to SWITCH_TAIL_TICKS
        # after its first chunk (None while it is still being counted)
        self.switch_degraded: dict[str, int] | None = {}
        self._switch_base: dict[str, int] = {}
        self._switch_tail = 0
        self._arm_tick = 0
        # the same robot's degraded ticks in as many ticks right before the arm: what a
        # window that long holds without a switch on this host, beside the switch's count
        self.switch_baseline = 0
        self._degraded_at: deque[int] = deque(maxlen=4096)  # tick numbers, newest last
        # ticks whose representation's version was not the decoding model's own: refused
        # (degraded) and counted; stays 0 (the switch happens on the version, by design)
        self.mixed_version_ticks = 0

    def _install(self, model, version: str, num_joints: int, subtask_dim: int) -> None:
        """Serve ``model`` (accepting world ``version``) from the next tick: its dtype,
        device and input buffers; the scene state prepared for another model is dropped."""
        self.model = model
        self.version = version  # the world-model version this expert accepts
        self.model_period_s = float(model.spec.period_s)
        self.period_s = self.model_period_s if self._period_s is None else float(self._period_s)
        dtype = model.dtype  # an expert of the contract (wam_core.models.contract)
        self._dtype = dtype
        # where the expert computes (a plug-in without the attribute computes on the CPU):
        # the inputs live there, a cuda_ipc cache's slots already do
        self._device = torch.device(getattr(model, 'device', 'cpu'))
        self._delta = model.spec.output == 'delta'
        self._joint = torch.zeros(1, num_joints, dtype=dtype, device=self._device)
        self._subtask = torch.zeros(1, subtask_dim, dtype=dtype, device=self._device)
        self._scene = None
        self._scene_key = ''

    # inputs ----------------------------------------------------------------
    @property
    def joint_positions(self) -> np.ndarray | None:
        """The latest valid joint state (configured order), or None before the first."""
        with self._input_lock:
            latest = self._pending_joint if self._pending_joint is not None else self._joint_np
        return None if latest is None else latest.copy()

    @property
    def has_inputs(self) -> bool:
        """Whether a joint state and a representation descriptor have arrived: what a tick
        needs before it can decode (an instance claims a robot only then)."""
        with self._input_lock:
            joint = self._pending_joint is not None or self._joint_np is not None
        return joint and self._descriptor is not None

    @property
    def descriptor_version(self) -> str | None:
        """The world version of the newest representation descriptor, if any arrived."""
        d = self._descriptor
        return d.model_version if d is not None else None

    def decodes(self, version: str | None) -> bool:
        """Whether a representation of ``version`` is decoded here: the served model's, an
        armed release's or the replaced one's (kept until a confirm)."""
        return version is not None and (
            version == self.version
            or any(m is not None and m.version == version for m in (self._armed, self.previous))
        )

    def set_joint_state(self, positions: np.ndarray) -> None:
        state = np.array(positions, dtype=np.float32)
        with self._input_lock:
            self._pending_joint = state

    def _take_inputs(self) -> None:
        with self._input_lock:
            state, self._pending_joint = self._pending_joint, None
            subtask, self._pending_subtask = self._pending_subtask, None
        if subtask is not None:
            self._subtask[0].copy_(subtask)
        if state is not None:
            self._joint_np = state
            self._joint[0].copy_(torch.from_numpy(state))

    def set_subtask(self, vector: np.ndarray) -> None:
        if self._subtask.shape[1] == 0:
            return  # the expert takes no conditioning vector (its prompt conditions it)
        v = torch.as_tensor(np.asarray(vector, dtype=np.float32))
        if v.shape != self._subtask.shape[1:] or not torch.isfinite(v).all():
            raise ValueError(f'subtask vector must be {self._subtask.shape[1]} finite values')
        with self._input_lock:
            self._pending_subtask = v.clone()

    def set_descriptor(self, d: Descriptor) -> None:
        self._descriptor = d

    def discard(self, reason: str) -> None:
        """The last tick's chunk could not be used after all (e.g. no feasible motion):
        it counts as a degraded tick, not a chunk."""
        self.chunks -= 1
        self.degraded[reason] = self.degraded.get(reason, 0) + 1
        self._degraded_at.append(self.ticks)

    @property
    def joint_state_used(self) -> np.ndarray | None:
        """The joint state the last tick decoded from (configured order)."""
        return self._joint_np

    @property
    def degraded_ticks(self) -> int:
        return sum(self.degraded.values())

    def _degrade(self, reason: str, stages) -> TickResult:
        self.degraded[reason] = self.degraded.get(reason, 0) + 1
        self._degraded_at.append(self.ticks)
        return TickResult('degraded', None, reason, stages=stages)

    # release switches ------------------------------------------------------
    def arm(self, model, version: str, tag: str) -> None:
        """Serve ``model`` from the first tick that finds a representation of ``version``
        (at once when that is the version served now): no tick ever decodes one version's
        representation with a model that accepts another. Its joints must be this one's."""
        if model.spec.joint_names and len(model.spec.joint_names) != self._joint.shape[1]:
            raise ValueError(
                f'the armed model commands {len(model.spec.joint_names)} joints, '
                f'this ticker {self._joint.shape[1]}'
            )
        self._switch_base = dict(self.degraded)
        self._arm_tick = self.ticks
        self.switch_degraded = None
        self._armed = ServedModel(model, version, tag)

    def disarm(self) -> None:
        if self._armed is not None and self.switch_degraded is None:
            self.switch_degraded = {}
        self._armed = None

    @property
    def armed(self) -> ServedModel | None:
        return self._armed

    def confirm(self) -> None:
        """The switch stands: the replaced model is let go."""
        self.previous = None

    def promote_armed(self, tag: str) -> bool:
        """Serve the armed release ``tag`` from now on without waiting for its first
        representation: for a standby that ticks nothing (no tick can mix versions). Call
        on the thread that ticks; False if that release is not the armed one."""
        armed = self._armed
        if armed is None or armed.tag != tag:
            return False
        self._switch(armed)
        return True

    def _switch(self, armed: ServedModel) -> None:
        self.previous = ServedModel(self.model, self.version, self.tag)
        subtask = self._subtask
        self._install(armed.model, armed.version, self._joint.shape[1], subtask_dim(armed.model))
        if subtask.shape == self._subtask.shape:  # the same conditioning: carried over
            self._subtask.copy_(subtask.to(self._device, self._dtype))
        if self._joint_np is not None:
            self._joint[0].copy_(torch.from_numpy(self._joint_np))
        self.tag = armed.tag
        self._armed = None
        self.switches += 1
        self.switched_at_ns = time.time_ns()
        self._switch_tail = SWITCH_TAIL_TICKS

    def _count_switch_tail(self) -> None:
        """After a switch's first chunk: count on for its tail, then settle the figure."""
        self._switch_tail -= 1
        if self._switch_tail == 0:
            span = self.ticks - self._arm_tick
            self.switch_baseline = sum(
                1 for k in self._degraded_at if self._arm_tick - span < k <= self._arm_tick
            )
            self.switch_degraded = {
                k: v - self._switch_base.get(k, 0)
                for k, v in self.degraded.items()
                if v > self._switch_base.get(k, 0)
            }

    # the tick --------------------------------------------------------------
    def tick(self) -> TickResult:
        """One tick: begin, decode, finish."""
        with torch.inference_mode():
            pending = self.begin()
            if isinstance(pending, PendingDecode):
                pending.decode_started = time.perf_counter()
                try:
                    out = self.model.decode(pending.scene, self._joint, self._subtask)[0]
                except BaseException:
                    self.abandon(pending)
                    raise
                pending = self.finish(pending, out)
        return pending

    def begin(self) -> TickResult | PendingDecode:
        """A tick up to its decode: the inputs taken, the representation read (version,
        TTL, seqlock) and its scene prepared; a degraded result when nothing usable is
        there. An instance serving several robots calls this for each, decodes them
        together (``batched_decode``), then calls ``finish`` for each. Call under
        torch.inference_mode()."""
        self.ticks += 1
        t0 = time.perf_counter()
        stages: dict[str, float] = {}
        self._take_inputs()
        if self._joint_np is None:
            return self._end(self._degrade('no_joint_state', stages))
        d = self._descriptor
        armed = self._armed
        if armed is not None and (
            armed.version == self.version or (d is not None and d.model_version == armed.version)
        ):
            self._switch(armed)
            armed = None
        if d is not None and d.model_version != self.version and armed is None:
            previous = self.previous
            if previous is None or d.model_version != previous.version:
                stages['cache_read'] = (time.perf_counter() - t0) * 1e3
                return self._end(self._degrade('version_mismatch', stages))
            # just switched: the descriptor is the replaced model's, its successor's not
            # here yet; the ring's newest entry of the served version (read below) serves
        res: ReadResult = (
            self.cache.read(d.slot, self.version, key=d.key, epoch=d.epoch)
            if d is not None and d.model_version == self.version
            else self.cache.latest(self.version)
        )
        if not res.ok and d is not None:
            # The descriptor is late or points into a ring the writer restarted: the newest
            # entry of the cache itself, under the same version, TTL and seqlock rules, so a
            # restarted world expert serves before DDS has matched its descriptor topic.
            first = res
            newest = self.cache.latest(self.version)
            if newest.ok:  # one read served this tick: count it once, as the hit
                self.cache.stats.refused[first.reason] -= 1
                res = newest
        if not res.ok and armed is not None:
            # mid-switch: the world expert already writes the armed model's version (its
            # descriptor not here yet): switch on the representation itself
            newest = self.cache.latest(armed.version)
            if newest.ok:
                self.cache.stats.refused[res.reason] -= 1
                self._switch(armed)
                res = newest
        if res.ok and res.entry.version != self.model.spec.world_version:
            # the model's own declaration, not the ticker's: a switch that let the two
            # drift apart is refused here, never decoded
            self.mixed_version_ticks += 1
            stages['cache_read'] = (time.perf_counter() - t0) * 1e3
            return self._end(self._degrade('mixed_version', stages))
        t1 = time.perf_counter()
        stages['cache_read'] = (t1 - t0) * 1e3
        if not res.ok:
            return self._end(self._degrade(res.reason, stages))
        fresh = res.entry.key != self._scene_key
        if fresh:
            # Zero-copy: the scene state is computed straight from the cache's buffer (a
            # numpy view, or a tensor on the device for cuda_ipc); the seqlock is re-checked
            # once the chunk is on the host (finish), when every kernel that read the slot
            # has run, so a slot rewritten meanwhile is never used.
            rep = representation_tensor(res.array, res.entry.dtype).unsqueeze(0)
            if rep.dtype != self._dtype or rep.device != self._device:
                rep = rep.to(self._device, self._dtype)
            self._scene, self._scene_key = self.model.prepare(rep), res.entry.key
            self.prepares += 1
            stages['prepare'] = (time.perf_counter() - t1) * 1e3
        return PendingDecode(self._scene, res, fresh, t0, stages)

    def decode_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The [1, N] joint state and [1, S] conditioning the pending decode reads."""
        return self._joint, self._subtask

    def finish(self, p: PendingDecode, out: torch.Tensor) -> TickResult:
        """The tick after its decode: ``out`` is this robot's [H, N] chunk tensor."""
        if self._delta:  # offsets from the state it decoded from -> positions
            out = out + self._joint[0]
        positions = out.float().cpu().numpy()  # on a GPU: the tick's one wait for the device
        if self.period_s != self.model_period_s:
            positions = resample_chunk(positions, self.model_period_s, self.period_s)
        stages, res = p.stages, p.res
        if p.fresh and not res.still_valid():
            self._scene, self._scene_key = None, ''
            self.prepares -= 1
            return self._end(self._degrade('torn', stages))
        t3 = time.perf_counter()
        stages['forward'] = (t3 - p.decode_started) * 1e3
        if (t3 - p.t0) * 1e3 > self.timeout_ms:
            return self._end(self._degrade('action_timeout', stages))
        if not np.all(np.isfinite(positions)):
            return self._end(self._degrade('non_finite_output', stages))
        self.chunks += 1
        return self._end(
            TickResult(
                'chunk',
                positions,
                '',
                res.entry.key,
                res.age_ms,
                res.entry.stamp_ns,
                stages,
                p.fresh,
            )
        )

    def abandon(self, p: PendingDecode) -> None:
        """The decode for ``p`` failed (raised): its prepared scene is not trusted again."""
        if p.fresh:
            self._scene, self._scene_key = None, ''

    def _end(self, res: TickResult) -> TickResult:
        if self._switch_tail > 0:
            self._count_switch_tail()
        return res

    def warmup(self, n: int, repr_shape, model=None) -> list[float]:
        """n full passes on a synthetic representation (not counted as ticks); each
        prepare + decode's milliseconds (the serving loop decides from them whether the
        expert decodes on the tick or off it). ``model``: another model than the one
        served (a release being staged), warmed up with its own input buffers."""
        model = self.model if model is None else model
        dtype = model.dtype
        device = torch.device(getattr(model, 'device', 'cpu'))
        rep = torch.zeros((1,) + tuple(repr_shape), dtype=dtype, device=device)
        joint = torch.zeros(1, self._joint.shape[1], dtype=dtype, device=device)
        subtask = torch.zeros(1, subtask_dim(model), dtype=dtype, device=device)
        times = []
        with torch.inference_mode():
            for _ in range(n):
                t0 = time.perf_counter()
                scene = model.prepare(rep)
                model.decode(scene, joint, subtask)[0].float().cpu()
                times.append((time.perf_counter() - t0) * 1e3)
        return times


# ticks after a switch's first chunk still counted as the switch's (0.5 s at 50 Hz): a new
# model's first prepares, a ring that changed version under a late descriptor
SWITCH_TAIL_TICKS = 25


def subtask_dim(model) -> int:
    """The length of the conditioning vector a model takes (0: none)."""
    return int(model.spec.conditioning_dim)
