"""The robot agent's task cycle: IDLE -> PERCEIVE -> PLAN -> ACT -> OBSERVE -> IDLE.

A plain state machine driven by events, so it is tested without ROS; the agent node
feeds it (perception ready, goal accepted/rejected, task result, success signal)
and acts on what ``step`` returns (send a goal, report done or aborted).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..common.config import AgentParams

IDLE, PERCEIVE, PLAN, ACT, OBSERVE, DONE, ABORTED = (
    'IDLE',
    'PERCEIVE',
    'PLAN',
    'ACT',
    'OBSERVE',
    'DONE',
    'ABORTED',
)


@dataclass
class Agent:
    cfg: AgentParams = field(default_factory=AgentParams)
    state: str = IDLE
    instruction: str = ''
    attempts: int = 0
    reason: str = ''
    entered: float = 0.0
    transitions: list[tuple[float, str, str, str]] = field(
        default_factory=list
    )  # (t, from, to, why)
    started: float | None = None
    finished: float | None = None
    _sent: float | None = None  # when this PLAN's goal went to the harness

    def _go(self, now: float, state: str, why: str) -> None:
        self.transitions.append((now, self.state, state, why))
        self.state, self.entered, self.reason = state, now, why
        self._sent = None

    def start(self, instruction: str, now: float) -> None:
        if self.state not in (IDLE, DONE, ABORTED):
            raise RuntimeError(f'agent busy in {self.state}')
        self.instruction, self.attempts, self.started, self.finished = instruction, 0, now, None
        self._go(now, PERCEIVE, f'task: {instruction}')

    def step(
        self,
        now: float,
        perception_ok: bool = False,
        goal_sent: bool = False,
        goal_accepted: bool | None = None,
        result: tuple[bool, str] | None = None,
        success: bool | None = None,
    ) -> str | None:
        """Advance on the latest facts; returns an action: 'send_goal' or None."""
        waited = now - self.entered
        if self.state == PERCEIVE:
            if perception_ok:
                self._go(now, PLAN, 'camera and joint states flowing')
                return 'send_goal'
            if waited > self.cfg.perceive_timeout_s:
                self._abort(now, f'no perception within {self.cfg.perceive_timeout_s:.0f} s')
        elif self.state == PLAN:
            if goal_sent and self._sent is None:
                self._sent = now
            if goal_accepted is True:
                self.attempts += 1
                self._go(now, ACT, f'plan accepted (attempt {self.attempts})')
            elif goal_accepted is False:
                self._abort(now, 'the harness rejected the task')
            elif self._sent is not None and now - self._sent > self.cfg.plan_timeout_s:
                self._abort(
                    now, f'no answer from the harness within {self.cfg.plan_timeout_s:.0f} s'
                )
            elif (
                self._sent is None
                and waited > self.cfg.plan_timeout_s + self.cfg.perceive_timeout_s
            ):
                # the goal waits for the harness's ExecuteTask server (a harness still
                # starting, as in a launch that starts everything at once)
                self._abort(now, 'no harness (ExecuteTask server) to send the task to')
        elif self.state == ACT:
            if result is not None:
                ok, why = result
                self._go(now, OBSERVE, f'execution {"finished" if ok else "failed"}: {why}')
        elif self.state == OBSERVE:
            if waited >= self.cfg.observe_s and success is not None:
                if success:
                    self.finished = now
                    self._go(now, DONE, 'success: the task is done')
                elif self.attempts < self.cfg.max_attempts:
                    self._go(now, PLAN, f'not done after attempt {self.attempts}: retrying')
                    return 'send_goal'
                else:
                    self._abort(now, f'not done after {self.attempts} attempts')
        return None

    def _abort(self, now: float, why: str) -> None:
        self.finished = now
        self._go(now, ABORTED, why)
