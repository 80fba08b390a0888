"""Harness: the only road from the action expert to the robot.

- Clamping gate: /action_expert/raw_chunk -> wam_core.limits.ClampGate ->
  /arm_controller/joint_trajectory. Wrong joints or any NaN/inf rejects a chunk whole.
- Safety stop: wam_core.safety.SafetyMonitor fed by /diagnostics, raw-chunk arrivals
  and a 100 Hz watchdog. A stop latches /safety/stop = true (transient local), sends
  a hold at the current joint positions and refuses chunks until everything is OK for
  the hold-off, or /harness/reset (std_srvs/Trigger) is called while everything is OK.
- Tasks: the ExecuteTask action (and /instruction, std_msgs/String, the same path)
  plans with the LLM planner (SGLang or any OpenAI-compatible server) falling back to
  the rules, embeds each subtask once and publishes it on /harness/active_subtask.
  Until the simulated robot reports task state, each subtask runs for
  ``task.subtask_duration_s``; cancel (or a safety stop) holds the robot.
"""

from __future__ import annotations

import threading
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from wam_core import ros_convert as rc
from wam_core.joint_state import JointStateError, JointStateMapper
from wam_core.latency import LatencyWindow, RateMeter
from wam_core.limits import (
    ChunkRejected,
    ClampGate,
    CommandTracker,
    default_limits,
    limits_from_dict,
)
from wam_core.plan import MAX_INSTRUCTION, PlanError
from wam_core.planner_llm import CircuitBreaker, FallbackPlanner, LLMPlanner
from wam_core.planner_rules import RulePlanner
from wam_core.safety import SafetyConfig, SafetyMonitor
from wam_interfaces.action import ExecuteTask
from wam_interfaces.msg import ActiveSubtask
from wam_interfaces.msg import Subtask as SubtaskMsg
from wam_util.diagnostics import NodeDiagnostics
from wam_util.executors import run_node
from wam_util.params import declare_stack_config, read_stack_config

LIMIT_FIELDS = ('lower', 'upper', 'velocity', 'effort', 'acceleration')


def latched_qos() -> QoSProfile:
    return QoSProfile(
        depth=1,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
        reliability=ReliabilityPolicy.RELIABLE,
    )


class HarnessNode(Node):
    def __init__(self, name: str = 'harness', **kwargs):
        super().__init__(name, **kwargs)
        declare_stack_config(self)
        cfg = read_stack_config(self)
        self.joint_names = cfg.control.joint_names
        self.period_s = cfg.control.period_s
        defaults = default_limits(self.joint_names)
        limits = {}
        for j in self.joint_names:
            limits[j] = {
                f: self.declare_parameter(
                    f'joint_limits.{j}.{f}', float(getattr(defaults[j], f))
                ).value
                for f in LIMIT_FIELDS
            }
        sdef = SafetyConfig()
        scfg = SafetyConfig(
            required_nodes=list(
                self.declare_parameter('safety.required_nodes', sdef.required_nodes).value
            ),
            silence_timeout_s=self.declare_parameter(
                'safety.silence_timeout_s', sdef.silence_timeout_s
            ).value,
            chunk_hold_s=self.declare_parameter('safety.chunk_hold_s', sdef.chunk_hold_s).value,
            chunk_timeout_s=self.declare_parameter(
                'safety.chunk_timeout_s', sdef.chunk_timeout_s
            ).value,
            holdoff_s=self.declare_parameter('safety.holdoff_s', sdef.holdoff_s).value,
        )
        self.gate = ClampGate(
            self.joint_names, limits_from_dict(self.joint_names, limits), self.period_s
        )
        self.tracker = CommandTracker()  # the gate's baseline: the command the robot is following
        self.monitor = SafetyMonitor(scfg, time.monotonic())
        self.joints = JointStateMapper(self.joint_names)
        self.current = None
        self.forwarded = 0
        self.refused_while_stopped = 0
        self.rejected_inputs = {}
        self.clamp_ms = LatencyWindow()
        self.stop_latency_ms = (
            LatencyWindow()
        )  # trigger (diagnostic received / timeout seen) -> hold sent
        self._chunk_rate = RateMeter()
        self._out_rate = RateMeter()
        self._stop_pub = self.create_publisher(Bool, '/safety/stop', latched_qos())
        self._out = self.create_publisher(JointTrajectory, '/arm_controller/joint_trajectory', 10)
        self.diagnostics = NodeDiagnostics(self, 'safety gate', self._diagnostics)
        self.create_subscription(JointTrajectory, '/action_expert/raw_chunk', self._on_chunk, 10)
        self.create_subscription(
            JointState, '/joint_states', self._on_joint_state, qos_profile_sensor_data
        )
        self.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 50)
        self.create_service(Trigger, '/harness/reset', self._on_reset)
        self._setup_tasks()
        self.create_timer(0.01, self._watchdog)
        self.create_timer(1.0, self.diagnostics.publish)
        self._publish_stop(True)  # the monitor starts stopped
        self.get_logger().info(f'safety: {self.monitor.reason}')

    # tasks ------------------------------------------------------------------------
    def _setup_tasks(self) -> None:
        use_llm = self.declare_parameter('planner.use_llm', True).value
        url = self.declare_parameter('planner.llm_url', 'http://localhost:30000/v1').value
        model = self.declare_parameter('planner.llm_model', 'default').value
        timeout = self.declare_parameter('planner.timeout_s', 2.0).value
        schema_mode = self.declare_parameter('planner.schema_mode', 'json_schema').value
        cooldown = self.declare_parameter('planner.breaker_cooldown_s', 30.0).value
        self.subtask_s = self.declare_parameter('task.subtask_duration_s', 2.0).value
        redis_url = self.declare_parameter('embedding.redis_url', '').value
        llm = (
            LLMPlanner(
                url,
                model,
                timeout_s=timeout,
                deadline_s=2 * timeout,
                schema_mode=schema_mode,
                breaker=CircuitBreaker(cooldown_s=cooldown),
            )
            if use_llm
            else None
        )
        self.planner = FallbackPlanner(
            llm, RulePlanner(), logger=lambda m: self.get_logger().warning(m)
        )
        from wam_core.embedding import SubtaskEmbedder

        self.embedder = SubtaskEmbedder(redis_url=redis_url)
        self.task_state = 'idle'
        self.active = None
        self.tasks = {'succeeded': 0, 'failed': 0, 'canceled': 0}
        self._busy = False
        self._busy_logged = 0.0
        self._subtask_pub = self.create_publisher(
            ActiveSubtask, '/harness/active_subtask', latched_qos()
        )
        self._action = ActionServer(
            self,
            ExecuteTask,
            '/harness/execute_task',
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            cancel_callback=lambda _: CancelResponse.ACCEPT,
        )
        self.create_subscription(String, '/instruction', self._on_instruction, 10)

    def _on_goal(self, goal) -> GoalResponse:
        text = goal.instruction
        if self._busy:  # counted, and logged at most once a second: a flood must not cost the gate
            self._reject_input('instruction_busy', ValueError('a task is already running'))
            return GoalResponse.REJECT
        if not text.strip() or len(text) > MAX_INSTRUCTION:
            self._reject_input(
                'instruction', ValueError(f'empty or longer than {MAX_INSTRUCTION} characters')
            )
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_instruction(self, msg: String) -> None:
        """Convenience entry: the same path as an ExecuteTask goal, without feedback."""
        if self._busy:
            # The cheapest possible refusal: this executor also runs the gate and the
            # watchdog, and a flood of instructions must not delay them.
            self.rejected_inputs['instruction_busy'] = (
                self.rejected_inputs.get('instruction_busy', 0) + 1
            )
            now = time.monotonic()
            if now - self._busy_logged >= 1.0:
                self._busy_logged = now
                self.get_logger().warning(
                    'rejected instruction: a task is already running (counted)'
                )
            return
        goal = ExecuteTask.Goal(instruction=msg.data)
        if self._on_goal(goal) == GoalResponse.ACCEPT:
            self.executor.create_task(self._run(msg.data, None))

    async def _execute(self, goal_handle):
        return await self._run(goal_handle.request.instruction, goal_handle)

    async def _sleep(self, seconds: float) -> None:
        fut = Future()
        timer = self.create_timer(seconds, lambda: fut.done() or fut.set_result(None))
        await fut
        self.destroy_timer(timer)

    async def _run(self, instruction: str, goal_handle):
        self._busy = True
        result = ExecuteTask.Result()
        fb = ExecuteTask.Feedback()
        try:
            self.task_state = fb.state = 'planning'
            if goal_handle is not None:
                goal_handle.publish_feedback(fb)
            try:
                plan = await self._plan_off_thread(instruction)
            except PlanError as exc:
                self.get_logger().error(f'task failed: {exc}')
                return self._finish(goal_handle, result, False, str(exc), 'failed')
            fb.plan = result.plan = [self._subtask_msg(s) for s in plan.subtasks]
            fb.planner = plan.source
            self.get_logger().info(
                f'plan ({plan.source}) for {instruction[:80]!r}: '
                + '; '.join(s.text() for s in plan.subtasks)
            )
            goal_id = str(id(goal_handle))
            for i, sub in enumerate(plan.subtasks):
                if goal_handle is not None and goal_handle.is_cancel_requested:
                    self._hold()
                    return self._finish(goal_handle, result, False, 'canceled', 'canceled')
                self._publish_subtask(goal_id, i, len(plan.subtasks), sub)
                fb.active_index, fb.active_skill, fb.state = i, sub.skill, 'executing'
                self.task_state = f'executing {i + 1}/{len(plan.subtasks)}: {sub.text()}'
                if goal_handle is not None:
                    goal_handle.publish_feedback(fb)
                end = time.monotonic() + self.subtask_s
                while time.monotonic() < end:
                    await self._sleep(0.05)
                    if goal_handle is not None and goal_handle.is_cancel_requested:
                        break
            if goal_handle is not None and goal_handle.is_cancel_requested:
                self._hold()
                return self._finish(goal_handle, result, False, 'canceled', 'canceled')
            return self._finish(goal_handle, result, True, 'done', 'succeeded')
        finally:
            self._busy = False

    async def _plan_off_thread(self, instruction: str):
        """Plan on a worker thread: an LLM call (timeouts, backoff sleeps) must never block
        this executor, which also runs the clamping gate and the safety watchdog."""
        fut = Future(executor=self.executor)

        def work():
            try:
                fut.set_result(self.planner.plan(instruction))
            except Exception as exc:  # delivered to the awaiting task below
                fut.set_exception(exc)

        threading.Thread(target=work, name='planner', daemon=True).start()
        return await fut

    def _finish(self, goal_handle, result, success: bool, reason: str, state: str):
        result.success, result.reason = success, reason
        self.task_state = state
        self.tasks[state] = self.tasks.get(state, 0) + 1
        if goal_handle is not None:
            if state == 'canceled':
                goal_handle.canceled()
            elif success:
                goal_handle.succeed()
            else:
                goal_handle.abort()
        return result

    def _hold(self) -> None:
        if self.current is not None:
            now_ns = time.time_ns()
            # where the robot is, inside the limits: a measured gripper at -1e-5 m is contact noise,
            # and nothing outside the limits ever goes to the robot
            here = np.clip(self.current, self.gate.lower, self.gate.upper).reshape(1, -1)
            self._out.publish(rc.joint_trajectory(self.joint_names, here, now_ns, 0.0))
            self.tracker.record(now_ns * 1e-9, [0.0], here)

    @staticmethod
    def _subtask_msg(sub) -> SubtaskMsg:
        m = SubtaskMsg(skill=sub.skill, text=sub.text())
        if sub.object:
            m.object_class, m.object_color = sub.object.cls, sub.object.color
        if sub.destination:
            m.destination_class, m.destination_color = sub.destination.cls, sub.destination.color
        return m

    def _publish_subtask(self, goal_id: str, index: int, count: int, sub) -> None:
        vec = self.embedder.embed(sub.text())  # once per subtask, never per tick
        weights = self.embedder.intents(vec)
        msg = ActiveSubtask(
            goal_id=goal_id, index=index, count=count, subtask=self._subtask_msg(sub)
        )
        msg.header.stamp = rc.ns_to_stamp(time.time_ns())
        msg.embedding = vec.tolist()
        msg.intent_names = list(weights)
        msg.intent_weights = [weights[k] for k in msg.intent_names]
        self._subtask_pub.publish(msg)
        self.active = sub

    # inputs -----------------------------------------------------------------------
    def _reject_input(self, what: str, exc: Exception) -> None:
        self.rejected_inputs[what] = self.rejected_inputs.get(what, 0) + 1
        self.get_logger().warning(f'rejected {what}: {exc}', throttle_duration_sec=1.0)

    def _on_joint_state(self, msg: JointState) -> None:
        try:
            self.current = self.joints.map(msg.name, msg.position).astype(float)
        except JointStateError as exc:
            self._reject_input('joint_state', exc)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        t0 = time.perf_counter()
        now = time.monotonic()
        for st in msg.status:
            level = st.level[0] if isinstance(st.level, bytes) else int(st.level)
            values = {kv.key: kv.value for kv in st.values}
            self.monitor.on_status(st.name, level, st.message, values, now)
        self._sync_stop(t0)

    def _on_chunk(self, msg: JointTrajectory) -> None:
        now = time.monotonic()
        self._chunk_rate.tick(now)
        self.monitor.on_chunk(now)
        if self.monitor.stopped:
            self.refused_while_stopped += 1
            return
        if self.current is None:
            self._reject_input('raw_chunk', ValueError('no joint state yet'))
            return
        t0 = time.perf_counter()
        try:
            times = [p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points]
            # The baseline is the command being followed, not the measured state: measured
            # velocity at a joint limit is contact noise and would reject every chunk.
            stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
            start_s = (stamp_ns or time.time_ns()) * 1e-9  # 0 means "now", as for the controller
            base, vel = self.tracker.baseline(start_s, self.current)
            res = self.gate.apply(
                msg.joint_names, [list(p.positions) for p in msg.points], times, base, vel
            )
            self.tracker.record(start_s, times, res.positions)
        except ChunkRejected as exc:
            self.get_logger().warning(f'rejected chunk: {exc}', throttle_duration_sec=1.0)
            return
        except ValueError as exc:  # ragged point lists and the like
            self.gate.rejected['shape'] = self.gate.rejected.get('shape', 0) + 1
            self.get_logger().warning(f'rejected chunk: {exc}', throttle_duration_sec=1.0)
            return
        out = JointTrajectory()
        out.header = msg.header
        out.joint_names = list(self.joint_names)
        out.points = msg.points[:0]
        for p, src in zip(res.positions, msg.points):
            q = type(src)()
            q.positions = p.tolist()
            q.time_from_start = src.time_from_start
            out.points.append(q)
        self.clamp_ms.add((time.perf_counter() - t0) * 1e3)
        self._out.publish(out)
        self._out_rate.tick(now)
        self.forwarded += 1

    # safety -----------------------------------------------------------------------
    def _watchdog(self) -> None:
        t0 = time.perf_counter()
        now = time.monotonic()
        if self.monitor.gap_hold_due(now):  # the action expert went quiet: hold before the stop
            self._hold()
            self.get_logger().warning(
                f'holding: no action chunk for {(now - self.monitor.last_chunk) * 1e3:.0f} ms',
                throttle_duration_sec=1.0,
            )
        self.monitor.evaluate(now)
        self._sync_stop(t0)

    def _sync_stop(self, t0: float) -> None:
        """Act on the monitor's decision, whichever input changed it."""
        if self.monitor.stopped and not self._published_stop:
            self._stop(t0)
        elif not self.monitor.stopped and self._published_stop:
            self.get_logger().info('safety stop cleared: everything OK for the hold-off')
            self._publish_stop(False)

    def _stop(self, t0: float) -> None:
        self._publish_stop(True)
        self._hold()
        self.stop_latency_ms.add((time.perf_counter() - t0) * 1e3)
        self.get_logger().error(f'SAFETY STOP: {self.monitor.reason}')

    def _publish_stop(self, value: bool) -> None:
        self._stop_pub.publish(Bool(data=value))
        self._published_stop = value

    def _on_reset(self, request, response):
        ok, message = self.monitor.reset(time.monotonic())
        if ok:
            self._publish_stop(False)
        response.success, response.message = ok, message
        self.get_logger().info(f'reset requested: {message}')
        return response

    def _diagnostics(self):
        now = time.monotonic()
        stopped = self.monitor.stopped
        level = rc.ERROR if stopped else rc.OK
        message = f'safety stop: {self.monitor.reason}' if stopped else 'forwarding clamped chunks'
        c = self.clamp_ms.summary()
        values = [
            ('safety stopped', stopped),
            ('safety stops', self.monitor.stops),
            ('holds on chunk gaps', self.monitor.gap_holds),
            ('forwarded chunks', self.forwarded),
            ('clamped points', self.gate.clamped_points),
            ('rejected chunks', sum(self.gate.rejected.values())),
            ('refused while stopped', self.refused_while_stopped),
            ('raw chunk rate Hz', self._chunk_rate.rate(now)),
            ('expected chunk Hz', 1.0 / self.period_s),
            ('forward rate Hz', self._out_rate.rate(now)),
            ('clamp p50 ms', c['p50']),
            ('clamp p99 ms', c['p99']),
            ('task', self.task_state),
            ('tasks succeeded', self.tasks['succeeded']),
            ('tasks failed', self.tasks['failed']),
            ('tasks canceled', self.tasks['canceled']),
            ('plans by llm', self.planner.plans.get('llm', 0)),
            ('plans by rules', self.planner.plans.get('rules', 0)),
            ('embedding cache hits', self.embedder.hits),
            ('embedding model calls', self.embedder.model_calls),
        ]
        values += [(f'llm fallback: {k}', v) for k, v in sorted(self.planner.fallbacks.items())]
        values += [(f'rejected chunks: {k}', v) for k, v in sorted(self.gate.rejected.items())]
        values += [(f'rejected: {k}', v) for k, v in sorted(self.rejected_inputs.items())]
        return level, message, values


def main(args=None) -> None:
    run_node(HarnessNode, args)


if __name__ == '__main__':
    main()
