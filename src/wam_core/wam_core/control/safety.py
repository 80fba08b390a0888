"""Safety monitor: decides when the robot must stop, from diagnostics and silence.

ROS-free and clock-explicit (every call takes ``now`` in seconds), so it is tested
deterministically; the harness's safety gate feeds it /diagnostics levels, the model
versions from the experts' typed statuses, raw-chunk arrivals and a watchdog timer,
and acts on its decisions (latch /safety/stop, send a hold, refuse chunks).

Starts stopped, until every required node has reported and been OK for the hold-off; a
node not heard within ``startup_timeout_s`` of the start is an error (a bring-up loads
and warms up models for seconds: a start-up is not a silence).
A gap asks for one (braking) hold at once: the last forwarded chunk's horizon running
out, or no raw chunk for ``chunk_hold_s`` (above the action expert's open-loop budget:
it is silent on purpose while the robot executes its last valid chunk). The stop comes
only if the silence reaches ``chunk_timeout_s``. Stops on: an ERROR or STALE status
from a required node; a required node silent for longer than ``silence_timeout_s``;
no raw chunk for ``chunk_timeout_s`` (once chunks have started); a world-expert model
version other than the one the action expert accepts. Clears after everything is OK for
``holdoff_s``, or by ``reset`` when everything is OK right now.
"""

from __future__ import annotations

from ..common.config import SafetyConfig
from ..common.status import ERROR, LEVEL_NAMES, STALE


def late_chunk(
    stamp_ns: int, last_point_s: float, now_ns: int, max_late_s: float, min_ahead_s: float
) -> str | None:
    """Why a raw chunk that reaches the gate at ``now_ns`` is too late to forward, or None.

    A chunk whose point 0 should have applied more than ``max_late_s`` ago was computed
    from a representation the robot has moved on from (the gate would have held by then
    anyway), and one that ends less than ``min_ahead_s`` from now would reach the
    controller after its last point, which the controller rejects as "ends in the past".
    A zero stamp means "start on receipt" and is never late.
    """
    if not stamp_ns:
        return None
    late_ns = now_ns - stamp_ns  # integers: no rounding at the boundaries
    if late_ns > round(max_late_s * 1e9):
        return f'point 0 applied {late_ns / 1e6:.0f} ms before it arrived'
    ahead_ns = round(last_point_s * 1e9) - late_ns  # from arrival to the last point
    if ahead_ns < round(min_ahead_s * 1e9):
        return f'its last point is {ahead_ns / 1e6:.0f} ms after its arrival'
    return None


def node_of(status_name: str, hardware_id: str = '') -> str:
    """The reporting node of a /diagnostics status, namespace included.

    diagnostic_updater names a status '<node name>: <task>' without the namespace, so
    two robots' action experts in a fleet report the same name; our nodes set the
    hardware_id to their fully qualified name, which tells them apart:
    ('action_expert: action expert', '/robot1/action_expert') -> 'robot1/action_expert'.
    A hardware_id that is not the node's qualified name leaves the plain node name."""
    name = status_name.split(':', 1)[0].strip().lstrip('/')
    qualified = hardware_id.strip()
    if qualified.startswith('/') and qualified.rsplit('/', 1)[-1] == name.rsplit('/', 1)[-1]:
        return qualified.lstrip('/')
    return name


def resolve_node(name: str, namespace: str) -> str:
    """A required node as ROS resolves a name: relative to the gate's namespace unless
    absolute ('action_expert' in '/robot1' -> 'robot1/action_expert'; '/world_expert' ->
    'world_expert', the fleet's shared world expert)."""
    name = name.strip()
    if name.startswith('/'):
        return name.lstrip('/')
    ns = namespace.strip('/')
    return f'{ns}/{name}' if ns else name


class SafetyMonitor:
    def __init__(self, cfg: SafetyConfig, now: float, namespace: str = ''):
        self.cfg = cfg
        # the nodes this robot depends on, qualified (see resolve_node)
        self.required = [resolve_node(n, namespace) for n in cfg.required_nodes]
        self.levels: dict[str, tuple[int, str]] = {}
        self.last_seen: dict[str, float] = {}
        self.started = now
        self.last_chunk: float | None = None
        self.horizon_end: float | None = None  # when the last forwarded chunk runs out
        self._gap_held: float | None = None  # last_chunk of the gap already held
        self.gap_holds = 0
        self.world_version = ''
        self.accepted_version = ''
        # every world version the action expert decodes for now: during a release switch
        # the armed (or replaced) model's too, so a switch is not a mismatch
        self.accepted_versions: frozenset[str] = frozenset()
        # Start stopped: nothing moves until every required node has reported OK for
        # the hold-off (or a reset). This is not counted as a stop.
        self.stopped = True
        self.reason = 'starting: waiting for ' + ', '.join(self.required)
        self.stops = 0
        self._ok_since: float | None = None

    # inputs ------------------------------------------------------------------
    def on_status(
        self, name: str, level: int, message: str, now: float, hardware_id: str = ''
    ) -> bool:
        """A /diagnostics status; True if it tripped a stop."""
        node = node_of(name, hardware_id)
        if node not in self.required:
            return False
        self.levels[node] = (level, message)
        self.last_seen[node] = now
        return self.evaluate(now)

    def on_versions(
        self,
        now: float,
        world: str | None = None,
        accepted: str | None = None,
        also_accepted: tuple[str, ...] = (),
    ) -> bool:
        """The world expert's model version and the one the action expert accepts (from
        their typed statuses), with the versions it also decodes for mid-switch
        (``also_accepted``); True if a mismatch tripped a stop."""
        if world is not None:
            self.world_version = world
        if accepted is not None:
            self.accepted_version = accepted
            self.accepted_versions = frozenset((accepted, *also_accepted))
        return self.evaluate(now)

    def on_chunk(self, now: float) -> None:
        self.last_chunk = now

    def on_forwarded(self, horizon_end: float) -> None:
        """A chunk went to the robot; it runs out at ``horizon_end`` (this clock)."""
        self.horizon_end = horizon_end

    # decisions ---------------------------------------------------------------
    def gap_hold_due(self, now: float) -> bool:
        """True once per gap while running: no raw chunk for longer than ``chunk_hold_s``, or
        the last forwarded chunk's horizon ran out."""
        if self.stopped or self.last_chunk is None or self._gap_held == self.last_chunk:
            return False
        ran_out = self.horizon_end is not None and now >= self.horizon_end
        if now - self.last_chunk <= self.cfg.chunk_hold_s and not ran_out:
            return False
        self._gap_held = self.last_chunk
        self.gap_holds += 1
        return True

    def problems(self, now: float) -> list[str]:
        out = []
        for node in self.required:
            seen = self.last_seen.get(node)
            if seen is None:
                # Never heard: the start-up stop holds until it reports (a problem from the
                # start, or the hold-off would clear a gate whose peers never spoke), and
                # only a node missing past the bring-up's time is an error.
                if now - self.started > self.cfg.startup_timeout_s:
                    out.append(f'{node} never reported')
                else:
                    out.append(f'waiting for {node}')
                continue
            if now - seen > self.cfg.silence_timeout_s:
                out.append(f'{node} silent for {now - seen:.1f} s')
            level, message = self.levels[node]
            if level in (ERROR, STALE):
                out.append(f'{node} {LEVEL_NAMES[level]}: {message}')
        if self.last_chunk is not None and now - self.last_chunk > self.cfg.chunk_timeout_s:
            out.append(f'no action chunk for {(now - self.last_chunk) * 1e3:.0f} ms')
        if (
            self.world_version
            and self.accepted_version
            and self.world_version not in self.accepted_versions
        ):
            out.append(
                f'model version mismatch: world {self.world_version}, '
                f'action expert accepts {self.accepted_version}'
            )
        return out

    def evaluate(self, now: float) -> bool:
        """Update the stop state; True when this call tripped a new stop."""
        problems = self.problems(now)
        if problems:
            self._ok_since = None
            if not self.stopped:
                self.stopped, self.reason = True, problems[0]
                self.stops += 1
                return True
            return False
        if self.stopped:
            if self._ok_since is None:
                self._ok_since = now
            elif now - self._ok_since >= self.cfg.holdoff_s:
                self.stopped, self.reason = False, ''
        return False

    def reset(self, now: float) -> tuple[bool, str]:
        problems = self.problems(now)
        if problems:
            return False, 'cannot reset: ' + '; '.join(problems)
        was = self.stopped
        self.stopped, self.reason, self._ok_since = False, '', None
        return True, 'reset' if was else 'was not stopped'
