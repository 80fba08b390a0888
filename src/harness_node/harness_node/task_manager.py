"""The task manager: ExecuteTask goals -> a plan -> one conditioning subtask at a time.

The ExecuteTask action (and ``instruction``, std_msgs/String, the same path) plans with
the LLM planner (SGLang or any OpenAI-compatible server) falling back to the rules,
embeds each subtask once and publishes it on harness/active_subtask (latched). Each
subtask runs for ``task.subtask_duration_s``; cancel holds the robot through the safety
gate's ``harness/hold`` service (the gate runs in another process).

Planning and embedding run on this manager's own worker thread, never in an executor
callback: an LLM call (timeouts, backoff sleeps) or a cold MiniLM forward must not delay
goals, feedback, or (in the single-process stack, where every node shares one executor)
the gate and the 50 Hz tick. The executor side only accepts goals, publishes feedback
and subtasks, and waits on timers.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.task import Future
from std_msgs.msg import String
from std_srvs.srv import Trigger

from wam_core.common.clock import wall_ns
from wam_core.common.config import TaskManagerParams
from wam_core.common.status import OK
from wam_core.planning.embedding import SharedEmbedders, SubtaskEmbedder
from wam_core.planning.llm import CircuitBreaker, FallbackPlanner, LLMPlanner
from wam_core.planning.paraphrase import SimilarityPlanner
from wam_core.planning.plan import MAX_INSTRUCTION, ObjectRef, PlanError
from wam_core.planning.plan_cache import PlanCache
from wam_core.planning.rules import RulePlanner
from wam_core.serving.latency import LatencyWindow
from wam_interfaces.action import ExecuteTask
from wam_interfaces.msg import ActiveSubtask, PerceivedObjects, TaskManagerStatus
from wam_interfaces.msg import Subtask as SubtaskMsg
from wam_util import convert, qos
from wam_util.diagnostics import NodeDiagnostics
from wam_util.status import TypedStatus

PLANNING_THREAD = 'task_planning'


class _Worker:
    """One daemon thread that runs submitted calls in order (as the planner thread did:
    an LLM call still in flight never holds up the process's exit)."""

    def __init__(self, name: str):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, args, done: Callable) -> None:
        """Run ``fn(*args)`` on the worker, then ``done(result, exception)`` there."""
        self._jobs.put((fn, args, done))

    def close(self) -> None:
        self._jobs.put(None)

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args, done = job
            try:
                result = fn(*args)
            except Exception as exc:  # delivered to the awaiting coroutine
                done(None, exc)
            else:
                done(result, None)


class TaskManager:
    def __init__(
        self,
        node,
        cfg: TaskManagerParams,
        diagnostics: NodeDiagnostics,
        embedders: SharedEmbedders | None = None,
    ):
        """``embedders``: the process's shared embedders (a host serving several robots);
        None: this manager loads its own."""
        self.node = node
        p = cfg.planner
        llm = (
            LLMPlanner(
                p.llm_url,
                p.llm_model,
                timeout_s=p.timeout_s,
                deadline_s=2 * p.timeout_s,
                schema_mode=p.schema_mode,
                breaker=CircuitBreaker(cooldown_s=p.breaker_cooldown_s),
            )
            if p.use_llm
            else None
        )
        url = cfg.embedding.redis_url
        self.embedder = embedders.get(url) if embedders else SubtaskEmbedder(redis_url=url)
        # this robot's embeddings (the embedder's own counters are the process's)
        self.embedding_hits = self.embedding_model_calls = 0
        # rules first; words they do not know mapped onto their vocabulary by meaning
        rules = SimilarityPlanner(self.embedder, p.similarity_threshold, RulePlanner())
        self.plan_cache = PlanCache(self.embedder) if p.plan_cache and llm else None
        self.planner = FallbackPlanner(
            llm,
            rules,
            logger=lambda m: node.get_logger().warning(m),
            cache=self.plan_cache,
            info=lambda m: node.get_logger().info(m),
            hedge_after_s=p.hedge_after_s,
        )
        # what the robot perceives (the agent's PERCEIVE step): plans are grounded on it
        self.perceived: list[ObjectRef] | None = None
        node.create_subscription(
            PerceivedObjects,
            'perceived_objects',
            self._on_perceived,
            qos.LATCHED,
            callback_group=ReentrantCallbackGroup(),
        )
        self.subtask_s = cfg.task.subtask_duration_s
        self._worker = _Worker(PLANNING_THREAD)
        self.task_state = 'idle'
        self.goal_id = ''  # the latest task's ExecuteTask goal id (hex)
        self.plan_ms = LatencyWindow()  # instruction -> plan (or refusal), ms
        self.active = None
        self.tasks = {'succeeded': 0, 'failed': 0, 'canceled': 0}
        self.rejected_inputs: dict[str, int] = {}
        self.holds_requested = 0
        self._busy = False
        self._busy_logged = 0.0
        # reentrant: the running goal's coroutine waits on timers in this group
        group = self.callback_group = ReentrantCallbackGroup()
        self._subtask_pub = node.create_publisher(
            ActiveSubtask, 'harness/active_subtask', qos.LATCHED
        )
        self._action = ActionServer(
            node,
            ExecuteTask,
            'harness/execute_task',
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            cancel_callback=lambda _: CancelResponse.ACCEPT,
            callback_group=group,
        )
        # relative: /instruction for a robot in the root namespace, /<robot>/instruction in
        # a fleet (absolute, one message would have tasked every robot of the fleet)
        node.create_subscription(
            String, 'instruction', self._on_instruction, qos.EVENTS, callback_group=group
        )
        # the gate's hold: a service in the harness's process (never a call into it)
        self._hold = node.create_client(Trigger, 'harness/hold', callback_group=group)
        # under the harness's name, as the rest of its interface (not ~/): a monitor
        # finds a robot's task status beside its gate status
        self.status = TypedStatus(
            node,
            diagnostics,
            'task manager',
            TaskManagerStatus,
            'harness/task_status',
            self._status,
        )

    def close(self) -> None:
        self._worker.close()
        self.node.destroy_client(self._hold)
        if self.planner.llm is not None:
            self.planner.llm.close()

    def hold(self) -> None:
        """Ask the gate to brake the robot to a hold (a canceled task). Not awaited: the
        task ends either way; a gate that cannot be reached is logged as an error."""
        self.holds_requested += 1
        if not self._hold.service_is_ready():
            self.node.get_logger().error(
                'cannot hold the robot: no harness/hold service (is the harness running?)'
            )
            return
        self._hold.call_async(Trigger.Request()).add_done_callback(self._on_hold_reply)

    def _on_hold_reply(self, fut) -> None:
        reply = fut.result()
        if reply is None or not reply.success:
            why = 'no reply' if reply is None else reply.message
            self.node.get_logger().error(f'the gate did not hold the robot: {why}')

    # goals ------------------------------------------------------------------------------
    def _reject_input(self, what: str, exc: Exception) -> None:
        self.rejected_inputs[what] = self.rejected_inputs.get(what, 0) + 1
        self.node.get_logger().warning(f'rejected {what}: {exc}', throttle_duration_sec=1.0)

    def _on_goal(self, goal) -> GoalResponse:
        text = goal.instruction
        if self._busy:  # counted, and logged at most once a second: a flood must cost little
            self._reject_input('instruction_busy', ValueError('a task is already running'))
            return GoalResponse.REJECT
        if not text.strip() or len(text) > MAX_INSTRUCTION:
            self._reject_input(
                'instruction', ValueError(f'empty or longer than {MAX_INSTRUCTION} characters')
            )
            return GoalResponse.REJECT
        # busy from acceptance, not from when the task's coroutine first runs: a second
        # goal or instruction handled in between would otherwise run beside this one
        self._busy = True
        return GoalResponse.ACCEPT

    def _on_instruction(self, msg: String) -> None:
        """Convenience entry: the same path as an ExecuteTask goal, without feedback."""
        if self._busy:
            # The cheapest possible refusal: the executor also runs the gate and the
            # watchdog, and a flood of instructions must not delay them.
            self.rejected_inputs['instruction_busy'] = (
                self.rejected_inputs.get('instruction_busy', 0) + 1
            )
            now = time.monotonic()
            if now - self._busy_logged >= 1.0:
                self._busy_logged = now
                self.node.get_logger().warning(
                    'rejected instruction: a task is already running (counted)'
                )
            return
        goal = ExecuteTask.Goal(instruction=msg.data)
        if self._on_goal(goal) == GoalResponse.ACCEPT:
            self.node.executor.create_task(self._run(msg.data, None))

    async def _execute(self, goal_handle):
        return await self._run(goal_handle.request.instruction, goal_handle)

    async def _sleep(self, seconds: float) -> None:
        fut = Future()
        timer = self.node.create_timer(
            seconds, lambda: fut.done() or fut.set_result(None), callback_group=self.callback_group
        )
        await fut
        self.node.destroy_timer(timer)

    async def _run(self, instruction: str, goal_handle):
        self._busy = True  # (already, since _on_goal accepted it)
        result = ExecuteTask.Result()
        fb = ExecuteTask.Feedback()
        # the ExecuteTask goal id (a fresh one for /instruction) on every log line, the
        # active subtask and the status, so one task can be followed end to end
        goal_id = (
            bytes(goal_handle.goal_id.uuid).hex() if goal_handle is not None else uuid.uuid4().hex
        )
        self.goal_id = goal_id
        tag = f'[goal {goal_id[:8]}]'
        try:
            self.task_state = fb.state = 'planning'
            if goal_handle is not None:
                goal_handle.publish_feedback(fb)
            try:
                plan, conditioning = await self._off_thread(self._plan_and_embed, instruction)
            except PlanError as exc:
                self.node.get_logger().error(f'{tag} task failed: {exc}')
                return self._finish(goal_handle, result, False, str(exc), 'failed')
            fb.plan = result.plan = [self._subtask_msg(s) for s in plan.subtasks]
            fb.planner = plan.source
            self.node.get_logger().info(
                f'{tag} plan ({plan.source}) for {instruction[:80]!r}: '
                + '; '.join(s.text() for s in plan.subtasks)
            )
            for i, (sub, (vec, weights)) in enumerate(
                zip(plan.subtasks, conditioning, strict=True)
            ):
                if goal_handle is not None and goal_handle.is_cancel_requested:
                    self.hold()
                    return self._finish(goal_handle, result, False, 'canceled', 'canceled')
                self._publish_subtask(goal_id, i, len(plan.subtasks), sub, vec, weights)
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
                self.hold()
                return self._finish(goal_handle, result, False, 'canceled', 'canceled')
            return self._finish(goal_handle, result, True, 'done', 'succeeded')
        finally:
            self._busy = False

    def _on_perceived(self, msg: PerceivedObjects) -> None:
        self.perceived = [
            ObjectRef(o.label.strip().lower(), o.color.strip().lower()) for o in msg.objects
        ]

    def _plan_and_embed(self, instruction: str):
        """On the worker thread: the plan and each subtask's embedding and intent weights
        (embedded once per subtask, before the first one conditions the robot)."""
        t0 = time.perf_counter()
        try:
            plan = self.planner.plan(instruction, self.perceived)
        finally:  # a refusal is an answer too
            self.plan_ms.add((time.perf_counter() - t0) * 1e3)
        conditioning = []
        for sub in plan.subtasks:
            vec, source = self.embedder.embed_counted(sub.text())
            self.embedding_hits += source == 'lru'
            self.embedding_model_calls += source == 'model'
            conditioning.append((vec, self.embedder.intents(vec)))
        return plan, conditioning

    async def _off_thread(self, fn, *args):
        """Run ``fn`` on the worker thread; await its result from the executor."""
        fut = Future(executor=self.node.executor)

        def deliver(result, exc) -> None:
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)

        self._worker.submit(fn, args, deliver)
        return await fut

    def _finish(self, goal_handle, result, success: bool, reason: str, state: str):
        result.success, result.reason = success, reason
        self.task_state = state
        self.node.get_logger().info(f'[goal {self.goal_id[:8]}] task {state}: {reason}')
        self.tasks[state] = self.tasks.get(state, 0) + 1
        if goal_handle is not None:
            if state == 'canceled':
                goal_handle.canceled()
            elif success:
                goal_handle.succeed()
            else:
                goal_handle.abort()
        return result

    # conditioning -----------------------------------------------------------------------
    @staticmethod
    def _subtask_msg(sub) -> SubtaskMsg:
        m = SubtaskMsg(skill=sub.skill, text=sub.text())
        if sub.object:
            m.object_class, m.object_color = sub.object.cls, sub.object.color
        if sub.destination:
            m.destination_class, m.destination_color = sub.destination.cls, sub.destination.color
        return m

    def _publish_subtask(self, goal_id: str, index: int, count: int, sub, vec, weights) -> None:
        msg = ActiveSubtask(
            goal_id=goal_id, index=index, count=count, subtask=self._subtask_msg(sub)
        )
        msg.header.stamp = convert.ns_to_stamp(wall_ns())
        msg.embedding = vec.tolist()
        msg.intent_names = list(weights)
        msg.intent_weights = [weights[k] for k in msg.intent_names]
        self._subtask_pub.publish(msg)
        self.active = sub

    def _status(self) -> TaskManagerStatus:
        return TaskManagerStatus(
            level=OK,
            message=self.task_state,
            task=self.task_state,
            tasks_succeeded=self.tasks['succeeded'],
            tasks_failed=self.tasks['failed'],
            tasks_canceled=self.tasks['canceled'],
            plans=convert.reason_counts(self.planner.plans),
            llm_fallbacks=convert.reason_counts(self.planner.fallbacks),
            goal_id=self.goal_id,
            plans_refused=convert.reason_counts(self.planner.refusals),
            plan_cache_hits=self.plan_cache.hits if self.plan_cache else 0,
            plan_cache_misses=self.plan_cache.misses if self.plan_cache else 0,
            perceived=[o.text() for o in self.perceived or ()],
            embedding_cache_hits=self.embedding_hits,
            embedding_model_calls=self.embedding_model_calls,
            rejected_inputs=convert.reason_counts(self.rejected_inputs),
        )
