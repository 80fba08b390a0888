"""Safety monitor: decides when the robot must stop, from diagnostics and silence.

ROS-free and clock-explicit (every call takes ``now`` in seconds), so it is tested
deterministically; the harness node feeds it /diagnostics, raw chunks and a watchdog
timer, and acts on its decisions (latch /safety/stop, send a hold, refuse chunks).

Starts stopped, until every required node has been OK for the hold-off.
A gap in the raw chunks longer than ``chunk_hold_s`` asks for one hold at once (the
robot stops following a chunk nobody renews); the stop comes only if the gap reaches
``chunk_timeout_s``. Stops on: an ERROR or STALE status from a required node; a
required node silent for longer than ``silence_timeout_s``; no raw chunk for
``chunk_timeout_s`` (once chunks have started); a world-expert model version other
than the one the action expert accepts. Clears after everything is OK for ``holdoff_s``, or by ``reset`` when
everything is OK right now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

OK, WARN, ERROR, STALE = 0, 1, 2, 3
LEVEL_NAMES = {OK: 'OK', WARN: 'WARN', ERROR: 'ERROR', STALE: 'STALE'}


@dataclass
class SafetyConfig:
    required_nodes: list[str] = field(default_factory=lambda: ['world_expert', 'action_expert'])
    silence_timeout_s: float = 3.0  # diagnostics come at 1 Hz
    chunk_hold_s: float = 0.045  # a missed tick and a late one: hold within TTL + one period
    chunk_timeout_s: float = 0.1  # five control periods without a raw chunk
    holdoff_s: float = 0.5  # debounce: long enough to ride out one flapping status


def node_of(status_name: str) -> str:
    """'world_expert: world expert' -> 'world_expert' (diagnostic_updater's naming)."""
    return status_name.split(':', 1)[0].strip().lstrip('/')


class SafetyMonitor:
    def __init__(self, cfg: SafetyConfig, now: float):
        self.cfg = cfg
        self.levels: dict[str, tuple[int, str]] = {}
        self.last_seen: dict[str, float] = {}
        self.started = now
        self.last_chunk: float | None = None
        self._gap_held: float | None = None  # last_chunk of the gap already held
        self.gap_holds = 0
        self.world_version = ''
        self.accepted_version = ''
        # Start stopped: nothing moves until every required node has reported OK for
        # the hold-off (or a reset). This is not counted as a stop.
        self.stopped = True
        self.reason = 'starting: waiting for ' + ', '.join(cfg.required_nodes)
        self.stops = 0
        self._ok_since: float | None = None

    # inputs ------------------------------------------------------------------
    def on_status(
        self, name: str, level: int, message: str, values: dict[str, str], now: float
    ) -> bool:
        """Returns True if this status tripped a stop."""
        node = node_of(name)
        if node not in self.cfg.required_nodes:
            return False
        self.levels[node] = (level, message)
        self.last_seen[node] = now
        if 'model version' in values and node == 'world_expert':
            self.world_version = values['model version']
        if 'world version accepted' in values:
            self.accepted_version = values['world version accepted']
        return self.evaluate(now)

    def on_chunk(self, now: float) -> None:
        self.last_chunk = now

    # decisions ---------------------------------------------------------------
    def gap_hold_due(self, now: float) -> bool:
        """True once per gap in the raw chunks longer than ``chunk_hold_s`` while running."""
        if self.stopped or self.last_chunk is None or self._gap_held == self.last_chunk:
            return False
        if now - self.last_chunk <= self.cfg.chunk_hold_s:
            return False
        self._gap_held = self.last_chunk
        self.gap_holds += 1
        return True

    def problems(self, now: float) -> list[str]:
        out = []
        for node in self.cfg.required_nodes:
            seen = self.last_seen.get(node)
            if seen is None:
                if now - self.started > self.cfg.silence_timeout_s:
                    out.append(f'{node} never reported')
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
            and self.world_version != self.accepted_version
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


def required_nodes_from(names: Sequence[str]) -> list[str]:
    return [n.strip().lstrip('/') for n in names if n.strip()]
