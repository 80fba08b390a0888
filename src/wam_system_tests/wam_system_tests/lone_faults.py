"""The lone robot's faults (part of `make faults`): the multi-process stack on the simulator,
one robot, each fault injected in turn and measured by a ``fault_recorder.Recorder``.

- world_kill, action_kill: kill -9 of the world or action expert, then a restart;
- camera_stall, frozen_frame: the camera stops, or repeats one frame while the arm moves;
- version_mismatch: the world expert restarts with a model of another version;
- llm_down, llm_slow, llm_garbage: the planner's LLM server misbehaves (``FakeLLMServer``);
- instruction_flood: a flood of /instruction messages;
- clock_future, clock_past, clock_step: the robot's clock jumps, or the wall clock every
  process reads steps.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict

from rclpy.action import ActionClient
from std_msgs.msg import String
from std_srvs.srv import Trigger

from robot_agent.stack import Stack, override
from wam_core.common.clock import SHIFT_ENV, write_shift
from wam_core.common.config import ActionExpertParams, WorldExpertParams
from wam_core.common.params import load_params
from wam_core.common.paths import default_config, resolve_path
from wam_core.models.manifest import read_manifest, write_manifest
from wam_interfaces.action import ExecuteTask
from wam_util import convert

from .fault_recorder import (
    RECOVERY_TARGET_S,
    FaultResult,
    Recorder,
    _chunk_after,
    _line,
    _wait,
    accepted_version_and_max_age,
    configured_limits,
    shm_segments,
    summarise,
)


def _serving(stack, rec: Recorder, timeout: float = 30.0) -> None:
    n = len(rec.forwarded)
    ok = _wait(stack, lambda: sum(1 for _, k, _ in rec.forwarded[n:] if k > 1) > 25, timeout)
    if ok is None:
        raise RuntimeError('the stack is not forwarding chunks before the fault')


def _kill_and_restart(stack, rec: Recorder, role: str, events: list) -> tuple:
    """kill -9 one node, restart it after 1 s; the fault clears at its first new output in
    ``events`` (when the stack produced it, not when this process received it)."""
    _serving(stack, rec)
    t_fault = time.monotonic()
    dead = stack.kill_child(role, reap=False)  # keep spinning: the recorder times the robot's view
    stack.spin_for(1.0)
    dead.wait(timeout=10)
    stack.start_child(role)
    t_restart = time.monotonic()
    n = len(events)
    _wait(stack, lambda: len(events) > n, 60.0)
    t_clear = rec.cleared_after_restart(events, n, t_restart)
    _chunk_after(stack, rec, t_clear)
    return t_fault, t_clear


def fault_world_kill(stack, rec: Recorder) -> FaultResult:
    """kill -9 of the world expert, then a restart (cleared: the new writer publishes)."""
    t_fault, t_clear = _kill_and_restart(stack, rec, 'world', rec.observations)
    return rec.result('world_kill', t_fault, t_clear, time.monotonic()).judge()


def fault_action_kill(stack, rec: Recorder) -> FaultResult:
    """kill -9 of the action expert, then a restart (cleared: the new expert ticks)."""
    t_fault, t_clear = _kill_and_restart(stack, rec, 'action', rec.raw)
    return rec.result('action_kill', t_fault, t_clear, time.monotonic()).judge()


def _robot_fault(
    stack, rec: Recorder, name: str, attr: str, value, normal, seconds: float = 1.0
) -> FaultResult:
    """Set one fault switch of the simulated robot for ``seconds``, then clear it."""
    t_fault = time.monotonic()
    setattr(stack.robot, attr, value)
    stack.spin_for(seconds)
    setattr(stack.robot, attr, normal)
    t_clear = time.monotonic()
    _chunk_after(stack, rec, t_clear)
    return rec.result(name, t_fault, t_clear, time.monotonic()).judge()


def fault_camera_stall(stack, rec: Recorder) -> FaultResult:
    """The camera stops publishing, then comes back."""
    _serving(stack, rec)
    return _robot_fault(stack, rec, 'camera_stall', 'camera_paused', True, False)


def fault_version_mismatch(stack, rec: Recorder) -> FaultResult:
    """The world expert restarts with a model of another version; recovery is a restart with the
    right one plus /harness/reset (a version change never clears by itself)."""
    _serving(stack, rec)
    src = resolve_path(load_params(stack.config, 'world_expert', WorldExpertParams).model_dir)
    tmp = tempfile.mkdtemp(prefix='wam_other_world_')
    try:
        other = os.path.join(tmp, 'world_expert')

        def other_version() -> None:
            shutil.copytree(src, other)
            man = read_manifest(src)
            os.remove(os.path.join(other, 'manifest.json'))
            write_manifest(other, man.name, man.version + '-other', dict(man.extra))

        # Copying and hashing the weights takes about a second: off this thread, so the
        # recorder keeps taking trajectories as they arrive (a stalled recorder would
        # see them late and count them as ending in the past).
        worker = threading.Thread(target=other_version, name='other_version')
        worker.start()
        while worker.is_alive():
            stack.spin_for(0.05)
        worker.join()
        _stop_spinning(stack, 'world')
        stack.spin_for(0.2)
        stack.start_child('world', override('world_expert', 'model_dir', other))
        n = len(rec.descriptors)
        t_fault = _wait(
            stack, lambda: any(v.endswith('-other') for _, v in rec.descriptors[n:]), 60.0
        )
        if t_fault is None:
            raise RuntimeError('the other-version world expert never published')
        # the first descriptor of the other version is the fault
        t_fault = next(t for t, v in rec.descriptors[n:] if v.endswith('-other'))
        stack.spin_for(1.0)
        _stop_spinning(stack, 'world')
        stack.spin_for(0.2)
        stack.start_child('world')
        n = len(rec.descriptors)
        t_clear = _wait(
            stack, lambda: any(not v.endswith('-other') for _, v in rec.descriptors[n:]), 60.0
        )
        _reset_harness(stack)
        _chunk_after(stack, rec, t_clear)
        return rec.result('version_mismatch', t_fault, t_clear, time.monotonic()).judge(
            needs_reset=True
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _stop_spinning(stack, role: str, timeout: float = 10.0) -> None:
    """SIGINT one node process and wait for its exit while spinning: a blocking wait (a
    shutting-down expert takes about a second) would leave the recorder to take the
    trajectories forwarded meanwhile a second late, as if they had ended in the past."""
    proc = stack.kill_child(role, signal.SIGINT, reap=False)
    stack.spin_for(timeout, until=lambda: proc.poll() is not None)
    proc.wait(timeout=1.0)


def _monitor_entity(stack, key: str, make):
    """A publisher or client on the monitor node, made once per stack and never destroyed
    while the stack runs: the monitor is spun on another thread (the observers), and
    destroying an entity under a spinning executor can end that thread (rclpy's
    InvalidHandle: it did, after 14 rounds of ``make faults REPEAT=20``)."""
    made = stack.__dict__.setdefault('_fault_entities', {})
    if key not in made:
        made[key] = make()
    return made[key]


def _reset_harness(stack) -> None:
    cli = _monitor_entity(
        stack, 'reset', lambda: stack.monitor.create_client(Trigger, '/harness/reset')
    )
    # wait while spinning: a blocking wait_for_service would stall the recorder (trajectories
    # taken a second late look as if they ended in the past)
    stack.spin_for(5.0, until=cli.service_is_ready)
    if cli.service_is_ready():
        for _ in range(20):  # the reset is refused until everything reports OK again
            fut = cli.call_async(Trigger.Request())
            stack.spin_for(2.0, until=fut.done)
            if fut.done() and fut.result().success:
                break
            stack.spin_for(0.25)


def _moving(stack, rec: Recorder, seed: int) -> None:
    """A fresh scene: the policy moves the arm (a frozen camera only matters while it moves)."""
    stack.robot.sim.reset(seed)
    _serving(stack, rec)
    stack.spin_for(0.3)


def fault_frozen_frame(stack, rec: Recorder) -> FaultResult:
    """The camera publishes the same frame forever (new stamps, same pixels) while the arm
    moves."""
    _moving(stack, rec, 5101)
    return _robot_fault(stack, rec, 'frozen_frame', 'camera_frozen', True, False)


def _clock_jump(stack, rec: Recorder, name: str, offset_s: float) -> FaultResult:
    _serving(stack, rec)
    return _robot_fault(stack, rec, name, 'clock_offset_s', offset_s, 0.0)


def fault_clock_future(stack, rec: Recorder) -> FaultResult:
    """The robot's clock jumps 5 s ahead: its camera stamps come from the future."""
    return _clock_jump(stack, rec, 'clock_future', 5.0)


def fault_clock_past(stack, rec: Recorder) -> FaultResult:
    """The robot's clock jumps 5 s back: its camera stamps are already old."""
    return _clock_jump(stack, rec, 'clock_past', -5.0)


CLOCK_STEP_S = 0.5


def _also(notes: str) -> str:
    return f' ({notes})' if notes else ''


def fault_clock_step(stack, rec: Recorder) -> FaultResult:
    """The wall clock every process of the stack reads steps 500 ms forward, runs 1.5 s,
    then steps back (an NTP correction, a resumed VM), through the injected time source
    (``WAM_CLOCK_SHIFT_FILE``): the machine's own clock is never touched. Chunks are
    stamped and judged by the live clock, a representation dated across the step is
    refused until a new frame is encoded (a few tens of ms), and nothing must hold the
    robot longer than that."""
    path = os.environ.get(SHIFT_ENV)
    if not path:
        raise RuntimeError(f'the clock_step drill needs the stack started with {SHIFT_ENV}')
    _serving(stack, rec)
    parts: list[FaultResult] = []
    for step_ns in (int(CLOCK_STEP_S * 1e9), 0):
        t_step = time.monotonic()
        write_shift(path, step_ns)
        _chunk_after(stack, rec, t_step)
        stack.spin_for(max(0.0, t_step + 1.5 - time.monotonic()))
        # the step back judges from itself on: the chunks before it were the first part's
        since = t_step if parts else None
        parts.append(rec.result('clock_step', t_step, t_step, time.monotonic(), since=since))
    fwd, back = parts
    res = FaultResult(
        'clock_step',
        None if None in (fwd.hold_ms, back.hold_ms) else max(fwd.hold_ms, back.hold_ms),
        fwd.unsafe + back.unsafe,
        fwd.stale + back.stale,
        None
        if None in (fwd.recovery_s, back.recovery_s)
        else max(fwd.recovery_s, back.recovery_s),
        notes=f'+{CLOCK_STEP_S * 1e3:.0f} ms: hold {fwd.hold_ms} ms, recovery '
        f'{fwd.recovery_s} s{_also(fwd.notes)}; -{CLOCK_STEP_S * 1e3:.0f} ms: hold '
        f'{back.hold_ms} ms, recovery {back.recovery_s} s{_also(back.notes)}',
        brake_ms=fwd.brake_ms,
        brake_by=fwd.brake_by,
        conformance=fwd.conformance + back.conformance,
        timeline=fwd.timeline + back.timeline,
        hold_target_ms=fwd.hold_target_ms,
    )
    # (no braking is expected: chunks resume within the open-loop budget)
    res.ok = (
        res.unsafe == 0
        and res.stale == 0
        and res.conformance == 0
        and res.hold_ms is not None
        and res.hold_ms <= res.hold_target_ms
        and res.recovery_s is not None
        and res.recovery_s <= RECOVERY_TARGET_S
    )
    return res


def _no_interruption(
    stack,
    rec: Recorder,
    name: str,
    action: Callable[[], float | None],
    within_s: float,
    window_s: float = 2.0,
) -> FaultResult:
    """Faults away from the control path (planner, instruction input): the robot must not
    notice. hold_ms is 0 when nothing interrupted the chunks; recovery_s is how long the
    task path took to answer (a fallback plan, a drained flood). "Not noticing" is judged
    against the same stack just before the fault: the full-chunk rate over at least
    ``window_s`` must stay within 25 % of the rate over the ``window_s`` before it."""
    _serving(stack, rec)
    stack.spin_for(max(0.0, window_s - 0.5))  # a full baseline window of serving
    t_fault = time.monotonic()
    answered = action()
    stack.spin_for(max(0.0, t_fault + window_s - time.monotonic()))
    t_end = time.monotonic()
    res = rec.result(name, t_fault, t_fault, t_end)

    def rate(t0: float, t1: float) -> float:
        return sum(1 for t, k, _ in rec.forwarded if t0 <= t <= t1 and k > 1) / max(t1 - t0, 1e-9)

    during, before = rate(t_fault, t_end), rate(t_fault - window_s, t_fault)
    stops = [t for t, v in rec.stops if t_fault <= t <= t_end and v]
    res.hold_ms = 0.0
    res.recovery_s = None if answered is None else answered - t_fault
    res.notes = (
        f'{during:.1f} full chunks/s forwarded during the fault against {before:.1f} before it, '
        f'{len(stops)} safety stops'
    )
    res.ok = (
        res.unsafe == 0
        and res.stale == 0
        and res.conformance == 0
        and not stops
        and during >= 0.75 * before
        and res.recovery_s is not None
        and res.recovery_s <= within_s
    )
    return res


def _goal(stack, instruction: str, timeout: float) -> float | None:
    """Send an ExecuteTask goal; the time its plan arrived (first feedback with a plan), or
    None."""
    client = _monitor_entity(
        stack,
        'execute_task',
        lambda: ActionClient(stack.monitor, ExecuteTask, '/harness/execute_task'),
    )
    client.wait_for_server(timeout_sec=10.0)  # at once, once the server is known
    planned = []
    fut = client.send_goal_async(
        ExecuteTask.Goal(instruction=instruction),
        feedback_callback=lambda fb: (
            fb.feedback.plan and not planned and planned.append(time.monotonic())
        ),
    )
    stack.spin_for(
        timeout, until=lambda: bool(planned) or (fut.done() and not fut.result().accepted)
    )
    if fut.done() and fut.result().accepted:
        done = fut.result().cancel_goal_async()
        stack.spin_for(3.0, until=done.done)
    return planned[0] if planned else None


LLM_BREAKER_COOLDOWN_S = 2.0  # the drill's circuit-breaker cool-down (30 s by default)
# slow: hedged after planner.hedge_after_s (1 s), before the request's own timeout
LLM_FALLBACK_REASON = {'down': 'http_5xx', 'slow': 'hedged', 'garbage': 'invalid_json'}


def _llm_fallbacks(stack) -> dict[str, int]:
    """The task manager's LLM fallbacks by reason, from its latest typed status."""
    task = stack.monitor.task
    return convert.counts_of(task.llm_fallbacks) if task is not None else {}


def _llm_fault(mode: str) -> Callable:
    def fault(stack, rec: Recorder) -> FaultResult:
        # each mode must reach the server: wait out a breaker opened by the previous mode
        stack.spin_for(LLM_BREAKER_COOLDOWN_S + 0.5)
        stack.llm_server.mode = mode
        reason = LLM_FALLBACK_REASON[mode]
        before = _llm_fallbacks(stack).get(reason, 0)
        # down/garbage: the retries, then the rules; slow: the rules after the 1 s hedge
        res = _no_interruption(
            stack,
            rec,
            f'llm_{mode}',
            lambda: _goal(stack, 'put the red apple in the fridge', 15.0),
            within_s=6.0,
        )
        stack.spin_for(2.5)  # the harness publishes diagnostics at 1 Hz
        seen = _llm_fallbacks(stack).get(reason, 0) - before
        res.notes += f'; fallbacks for {reason}: +{seen:g}'
        res.ok = res.ok and seen >= 1
        return res

    fault.__doc__ = (
        f'The LLM server is {mode}: plans fall back to the rules; control never notices.'
    )
    return fault


def fault_instruction_flood(stack, rec: Recorder, count: int = 2000) -> FaultResult:
    """A flood of /instruction messages: the harness plans one task at a time and refuses the
    rest."""
    pub = _monitor_entity(
        stack, 'instruction', lambda: stack.monitor.create_publisher(String, '/instruction', 100)
    )

    def flood() -> float | None:
        for i in range(count):
            pub.publish(String(data=f'put the red apple in the fridge #{i}'))
            if i % 100 == 0:
                stack.spin_for(0.01)
        stack.spin_for(1.0)
        return time.monotonic()

    return _no_interruption(stack, rec, 'instruction_flood', flood, within_s=10.0)


FAULTS = {
    'world_kill': fault_world_kill,
    'action_kill': fault_action_kill,
    'camera_stall': fault_camera_stall,
    'frozen_frame': fault_frozen_frame,
    'version_mismatch': fault_version_mismatch,
    'llm_down': _llm_fault('down'),
    'llm_slow': _llm_fault('slow'),
    'llm_garbage': _llm_fault('garbage'),
    'instruction_flood': fault_instruction_flood,
    'clock_future': fault_clock_future,
    'clock_past': fault_clock_past,
    'clock_step': fault_clock_step,
}


class FakeLLMServer:
    """An OpenAI-compatible endpoint that misbehaves on demand: 'down' (connection refused
    is simulated by a 503 without a body), 'slow' (answers after 10 s) or 'garbage' (a
    well-formed reply whose content is not JSON)."""

    def __init__(self):
        import http.server
        import threading

        self.mode = 'down'
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                try:
                    self._answer()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the planner gave up waiting ('slow'): expected

            def _answer(self):
                self.rfile.read(int(self.headers.get('Content-Length', 0) or 0))
                if server.mode == 'slow':
                    time.sleep(10.0)
                if server.mode == 'down':
                    self.send_response(503)
                    self.end_headers()
                    return
                # a well-formed chat reply whose answer is not a plan (random bytes, hex)
                body = json.dumps(
                    {'choices': [{'message': {'content': '<<not json>> ' + os.urandom(48).hex()}}]}
                ).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f'http://127.0.0.1:{self.httpd.server_address[1]}/v1'
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def run_lone(
    faults: list[str], seed: int, progress: bool, shm_name: str, repeat: int
) -> dict[str, object]:
    import psutil

    config = default_config()
    before = set(shm_segments())
    # the wall clock the stack's processes (and this one) read: a drill may step it
    shift_dir = tempfile.mkdtemp(prefix='wam_clock_')
    shift_path = os.path.join(shift_dir, 'shift_ns')
    write_shift(shift_path, 0)
    previous_shift = os.environ.get(SHIFT_ENV)
    os.environ[SHIFT_ENV] = shift_path
    llm = FakeLLMServer()
    extra = override('task_manager', 'planner.llm_url', llm.url)
    extra += override('task_manager', 'planner.breaker_cooldown_s', LLM_BREAKER_COOLDOWN_S)
    extra += ['-p', f'repr_cache.shm_name:={shm_name}'] if shm_name else []
    stack = Stack('multi', config, robot='sim', seed=seed, extra_args=extra)
    stack.llm_server = llm
    results: list[FaultResult] = []
    pids = set()
    rec = None
    try:
        stack.wait_ready(120)
        stack.spin_for(
            3.0, until=lambda: stack.monitor.forwarded > 0 and not stack.monitor.safety_stop
        )
        period = load_params(config, 'action_expert', ActionExpertParams).control.period_s
        rec = Recorder(
            stack, *accepted_version_and_max_age(config), configured_limits(config), period
        )
        action = load_params(config, 'action_expert', ActionExpertParams)
        rec.watch_cache(shm_name or action.repr_cache.shm_name)
        for i in range(repeat):
            for name in faults:
                r = FAULTS[name](stack, rec)
                results.append(r)
                pids |= {p.pid for p in stack.procs}
                if progress:
                    print(f'{f"[{i + 1}/{repeat}] " if repeat > 1 else ""}{_line(r)}', flush=True)
                stack.spin_for(1.0)
    finally:
        pids |= {p.pid for p in stack.procs}
        stack.shutdown()
        llm.close()
        if previous_shift is None:
            os.environ.pop(SHIFT_ENV, None)
        else:
            os.environ[SHIFT_ENV] = previous_shift
        shutil.rmtree(shift_dir, ignore_errors=True)
    time.sleep(0.5)
    leaked_segments = sorted(set(shm_segments()) - before)
    leaked_procs = sorted(
        p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != 'zombie'
    )
    return {
        'faults': [asdict(r) for r in results],
        'summary': summarise(results),
        'conformance_checked': rec.conformance_all.checked if rec else 0,
        'conformance_violations': rec.conformance_all.total if rec else 0,
        'conformance_examples': rec.conformance_examples if rec else [],
        'leaked_segments': leaked_segments,
        'leaked_processes': leaked_procs,
        'all_ok': all(r.ok for r in results) and not leaked_segments and not leaked_procs,
    }
