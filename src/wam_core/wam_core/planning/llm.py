"""LLM planner: any OpenAI-compatible chat-completions server (SGLang in production).

The request asks for JSON constrained by the plan's JSON schema (``response_format``
``json_schema``), so a constrained-decoding server (SGLang, llama.cpp) can only emit
a well-formed plan; the reply is still parsed and validated here. Transport failures
(timeout, refused connection, HTTP 5xx) are retried with exponential backoff and
jitter inside one overall deadline; a circuit breaker stops calling a dead server for
a cool-down. ``FallbackPlanner`` is the whole chain: the safety guard, the LLM, the rules
on any LLM failure (including a valid plan that names objects the instruction never
mentions, or that the robot does not see), and the grounding check; it counts why.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import httpx

from .grounding import grounding_reason
from .guard import unsafe_reason
from .plan import (
    MAX_INSTRUCTION,
    PLAN_SCHEMA,
    SKILLS,
    ObjectRef,
    Plan,
    PlanError,
    validate_plan,
)
from .rules import ungrounded_objects

MAX_REPLY_BYTES = 16_384

SYSTEM_PROMPT = (
    'You turn a robot instruction into a plan: a JSON object {"subtasks": [...]}. '
    'Each subtask has '
    f'"skill" (one of {", ".join(SKILLS)}), "object" ({{"class", "color"}} or null) '
    'and "destination" '
    '({"class", "color"} or null). Pick-and-place is: perceive, locate X, grasp X, '
    'transport X to Y, '
    'place X to Y, release X. Use English class and colour words, lower case. '
    'Reply with the JSON only.'
)


class LLMError(RuntimeError):
    """The LLM could not give a plan; ``reason`` is a short counter key."""

    def __init__(self, reason: str, detail: str = ''):
        super().__init__(f'{reason}: {detail}' if detail else reason)
        self.reason = reason


class CircuitBreaker:
    def __init__(
        self,
        failures: int = 3,
        cooldown_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.threshold = failures
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.failures = 0
        self.open_until = 0.0

    def allow(self) -> bool:
        return self.clock() >= self.open_until

    def success(self) -> None:
        self.failures = 0

    def failure(self) -> None:
        self.failures += 1
        if self.failures >= self.threshold:
            self.open_until = self.clock() + self.cooldown_s
            self.failures = 0


class LLMPlanner:
    name = 'llm'

    def __init__(
        self,
        base_url: str = 'http://localhost:30000/v1',
        model: str = 'default',
        timeout_s: float = 2.0,
        deadline_s: float = 4.0,
        retries: int = 2,
        backoff_s: float = 0.1,
        api_key: str = '',
        breaker: CircuitBreaker | None = None,
        schema_mode: str = 'json_schema',
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ):
        self.url = base_url.rstrip('/') + '/chat/completions'
        self.model = model
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.retries = retries
        self.backoff_s = backoff_s
        if schema_mode not in ('json_schema', 'json_object'):
            raise ValueError(
                "schema_mode must be 'json_schema' (OpenAI, SGLang) or 'json_object' (llama.cpp)"
            )
        self.schema_mode = schema_mode
        self.breaker = breaker or CircuitBreaker()
        self.sleep = sleep
        self.rng = rng or random.Random()
        headers = {'Authorization': f'Bearer {api_key}'} if api_key else {}
        self._client = httpx.Client(
            headers=headers, trust_env=False
        )  # no proxies: loopback/LAN server
        self.last_reply_bytes = 0  # what the last call read of its reply

    def request_body(self, instruction: str) -> dict:
        return {
            'model': self.model,
            'temperature': 0.0,
            'max_tokens': 512,
            'messages': [
                {'role': 'system', 'content': SYSTEM_PROMPT},
                {'role': 'user', 'content': instruction},
            ],
            # OpenAI's and SGLang's form; llama.cpp's server takes the schema beside json_object.
            'response_format': (
                {
                    'type': 'json_schema',
                    'json_schema': {'name': 'task_plan', 'schema': PLAN_SCHEMA, 'strict': True},
                }
                if self.schema_mode == 'json_schema'
                else {'type': 'json_object', 'schema': PLAN_SCHEMA}
            ),
        }

    def plan(self, instruction: str) -> Plan:
        if not instruction.strip() or len(instruction) > MAX_INSTRUCTION:
            raise LLMError('bad_instruction', 'empty or oversized instruction')
        if not self.breaker.allow():
            raise LLMError(
                'circuit_open', 'server failed repeatedly; not calling it during the cool-down'
            )
        start = time.monotonic()
        body = self.request_body(instruction)
        last = LLMError('unreachable')
        for attempt in range(self.retries + 1):
            remaining = self.deadline_s - (time.monotonic() - start)
            if remaining <= 0.05:
                break
            try:
                status, content = self._post(body, start, min(self.timeout_s, remaining))
            except httpx.TimeoutException as exc:
                last = LLMError('timeout', str(exc) or 'no reply in time')
            except httpx.TransportError as exc:
                last = LLMError('connection', str(exc))
            else:
                if status >= 500:
                    last = LLMError('http_5xx', f'HTTP {status}')
                elif status != 200:
                    self.breaker.failure()
                    raise LLMError('http_4xx', f'HTTP {status}')
                else:
                    self.breaker.success()
                    return self._parse(content)
            self.breaker.failure()
            if not self.breaker.allow():
                break
            if attempt < self.retries:
                pause = (
                    self.backoff_s * (2**attempt) * (0.5 + self.rng.random())
                )  # full jitter around 2^n
                self.sleep(min(pause, max(0.0, self.deadline_s - (time.monotonic() - start))))
        raise last

    def _post(self, body: dict, start: float, timeout: float) -> tuple[int, bytes]:
        """(status, reply bytes), read as a stream within a byte budget and the planner's
        overall deadline. httpx's timeout bounds each read, not the reply: a server that
        trickles bytes would keep a plain read going for ever, and the size of a reply
        could only be judged once all of it was in memory."""
        got = bytearray()
        self.last_reply_bytes = 0
        with self._client.stream('POST', self.url, json=body, timeout=timeout) as resp:
            for chunk in resp.iter_bytes():
                got += chunk
                self.last_reply_bytes = len(got)
                if len(got) > MAX_REPLY_BYTES:
                    raise LLMError('oversized', f'over {MAX_REPLY_BYTES} bytes')
                if time.monotonic() - start > self.deadline_s:
                    raise httpx.ReadTimeout(
                        f'the reply was still coming after the {self.deadline_s:g} s deadline'
                    )
            return resp.status_code, bytes(got)

    def _parse(self, raw: bytes) -> Plan:
        try:
            content = json.loads(raw)['choices'][0]['message']['content']
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError('bad_response', 'not an OpenAI chat-completions reply') from None
        if not isinstance(content, str) or not content.strip():
            raise LLMError('empty', 'empty message content')
        try:
            doc = json.loads(content)
        except ValueError:
            raise LLMError('invalid_json', content[:80]) from None
        try:
            return validate_plan(doc, self.name)
        except PlanError as exc:
            raise LLMError('schema', str(exc)) from None

    def close(self) -> None:
        self._client.close()


class FallbackPlanner:
    """The planning chain: the safety guard, then the LLM (when configured), then the
    rules (with the similarity mapping when given a ``SimilarityPlanner``), then the
    grounding check against what the robot perceives. Counts plans by planner, LLM
    fallbacks by reason and refusals by kind (unsafe, not_in_view, no_plan).

    An LLM server that has never answered is the default path of a machine without one
    (the shipped configuration names localhost): that is said once, at INFO (``info``),
    and the rules plan; once the server has answered, each failure warns (``logger``).

    ``hedge_after_s`` > 0: a hedged plan. An LLM slower than that is not waited for: the
    rules plan at once (fallback reason ``hedged``) and the robot starts; the LLM's plan,
    if it still comes and validates, goes to the plan cache for the next time the same
    task is asked (a task already under way is not re-planned under the robot)."""

    # failures that mean no server is listening (or the breaker after such failures)
    NOT_THERE = ('connection', 'unreachable', 'circuit_open')

    def __init__(
        self,
        llm: LLMPlanner | None,
        rules,
        logger: Callable[[str], None] = print,
        cache=None,
        info: Callable[[str], None] | None = None,
        hedge_after_s: float = 0.0,
    ):
        self.llm = llm
        self.hedge_after_s = hedge_after_s
        # one LLM request at a time; a hedged one finishes there while the rules plan
        self._pool = (
            ThreadPoolExecutor(1, thread_name_prefix='llm_plan')
            if llm is not None and hedge_after_s > 0
            else None
        )
        self._late: list[tuple[str, Plan]] = []  # hedged plans that came later (to cache)
        self._late_lock = threading.Lock()
        self.late_plans = 0
        self.rules = rules
        self.logger = logger
        self.info = info or logger
        self.llm_answered = False  # the server replied at least once (any reply)
        self._said_rules = False
        self.cache = cache  # a PlanCache: validated LLM plans reused for the same request
        self.fallbacks: dict[str, int] = {}
        self.plans: dict[str, int] = {}
        self.refusals: dict[str, int] = {}

    def _refuse(self, kind: str, reason: str) -> PlanError:
        self.refusals[kind] = self.refusals.get(kind, 0) + 1
        return PlanError(reason)

    def _note_failure(self, exc: LLMError) -> None:
        if exc.reason not in (*self.NOT_THERE, 'hedged'):
            self.llm_answered = True  # it replied, badly: a server is there
        if self.llm_answered:
            self.logger(f'LLM planner failed ({exc}); falling back to rules')
        elif not self._said_rules:
            self._said_rules = True
            self.info(
                f'no LLM server answers at {self.llm.url} ({exc.reason}): planning with '
                'rules (an LLM: `make demo PLANNER=llm`, or serve one there; '
                'planner.use_llm: false skips it)'
            )

    def _validated(self, instruction: str, perceived) -> Plan:
        plan = self.llm.plan(instruction)
        extra = ungrounded_objects(plan, instruction)
        if extra:
            raise LLMError('ungrounded', f'plan names objects the instruction does not: {extra}')
        if perceived is not None and grounding_reason(plan, perceived):
            raise LLMError('not_in_view', grounding_reason(plan, perceived))
        return plan

    def _ask_llm(self, instruction: str, perceived) -> Plan:
        """The LLM's validated plan, or LLMError; hedged: 'hedged' once it is slower
        than hedge_after_s (it goes on in the background)."""
        if self._pool is None:
            return self._validated(instruction, perceived)
        future = self._pool.submit(self._validated, instruction, perceived)
        try:
            return future.result(timeout=self.hedge_after_s)
        except FutureTimeout:
            future.add_done_callback(lambda f: self._keep_late(instruction, f))
            raise LLMError(
                'hedged', f'no plan within {self.hedge_after_s:g} s: the rules plan meanwhile'
            ) from None

    def _keep_late(self, instruction: str, future) -> None:
        # on the LLM's thread: only noted here, cached on the planner's own thread
        if future.cancelled() or future.exception() is not None:
            return
        with self._late_lock:
            self._late.append((instruction, future.result()))

    def _cache_late_plans(self) -> None:
        with self._late_lock:
            late, self._late = self._late, []
        for instruction, plan in late:
            self.late_plans += 1
            if self.cache is not None:
                self.cache.put(instruction, self.llm.model, plan)

    def plan(self, instruction: str, perceived: Sequence[ObjectRef] | None = None) -> Plan:
        """A validated plan, or PlanError with the reason. ``perceived``: the objects the
        robot sees (None: no perception reported, plans are not grounded)."""
        unsafe = unsafe_reason(instruction) if isinstance(instruction, str) else None
        if unsafe:
            raise self._refuse('unsafe', unsafe)
        self._cache_late_plans()
        if self.llm is not None and self.cache is not None:
            cached = self.cache.get(instruction, self.llm.model)
            usable = cached is not None and (
                perceived is None or not grounding_reason(cached, perceived)
            )
            self.cache.count(usable)
            if usable:
                self.plans['llm_cached'] = self.plans.get('llm_cached', 0) + 1
                return Plan(cached.subtasks, 'llm_cached')
        if self.llm is not None:
            try:
                plan = self._ask_llm(instruction, perceived)
                self.plans['llm'] = self.plans.get('llm', 0) + 1
                if self.cache is not None:
                    self.cache.put(instruction, self.llm.model, plan)
                self.llm_answered = True
                return plan
            except LLMError as exc:
                self.fallbacks[exc.reason] = self.fallbacks.get(exc.reason, 0) + 1
                self._note_failure(exc)
        try:
            plan = self.rules.plan(instruction)
        except PlanError as exc:
            raise self._refuse('no_plan', f'cannot plan {instruction[:80]!r}: {exc}') from None
        if perceived is not None:
            why = grounding_reason(plan, perceived)
            if why:
                raise self._refuse('not_in_view', why)
        self.plans[plan.source] = self.plans.get(plan.source, 0) + 1
        return plan
