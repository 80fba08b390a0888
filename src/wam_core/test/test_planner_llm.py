"""LLM planner against a local HTTP server that answers in each of the ways servers fail."""

import http.server
import json
import socket
import threading
import time

import pytest

from wam_core.planning.llm import CircuitBreaker, FallbackPlanner, LLMError, LLMPlanner
from wam_core.planning.plan import PlanError
from wam_core.planning.rules import RulePlanner

VALID = {
    'subtasks': [
        {'skill': 'perceive', 'object': None, 'destination': None},
        {'skill': 'grasp', 'object': {'class': 'cube', 'color': 'blue'}, 'destination': None},
    ]
}
TIMEOUT = 0.5


class Server:
    def __init__(self):
        self.mode = 'valid'
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
                outer.requests.append((self.path, body))
                mode = outer.mode
                if mode == 'slow':
                    time.sleep(TIMEOUT * 2.5)
                if mode == 'late':  # within the request timeout, after a hedge
                    time.sleep(TIMEOUT * 0.6)
                if mode in ('trickle', 'mebibyte'):
                    self._stream(mode)
                    return
                if mode == 'http500':
                    self.send_response(500)
                    self.end_headers()
                    return
                content = {
                    'valid': json.dumps(VALID),
                    'slow': json.dumps(VALID),
                    'late': json.dumps(VALID),
                    'invalid_json': '{"subtasks": [',
                    'schema': json.dumps(
                        {'subtasks': [{'skill': 'teleport', 'object': None, 'destination': None}]}
                    ),
                    'oversized': ' ' * 20000 + json.dumps(VALID),
                }[mode]
                data = json.dumps(
                    {'choices': [{'message': {'role': 'assistant', 'content': content}}]}
                ).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, mode):
                """trickle: a byte every 50 ms, forever (each within any read timeout);
                mebibyte: 1 MiB of reply. Counts what it managed to send."""
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(1 << 20))
                self.end_headers()
                try:
                    if mode == 'trickle':
                        for _ in range(2000):
                            self.wfile.write(b' ')
                            self.wfile.flush()
                            outer.sent += 1
                            time.sleep(0.05)
                    else:
                        for _ in range(64):
                            self.wfile.write(b' ' * 16384)
                            outer.sent += 16384
                except OSError:  # the client hung up: what it asked for
                    pass

        self.sent = 0
        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = f'http://127.0.0.1:{self.httpd.server_address[1]}/v1'
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def _planner(url, **kw):
    kw.setdefault('deadline_s', 3 * TIMEOUT)
    return LLMPlanner(url, timeout_s=TIMEOUT, retries=2, backoff_s=0.02, **kw)


def test_valid_plan_and_the_request_asks_for_schema_constrained_json(server):
    plan = _planner(server.url).plan('pick up the blue cube')
    assert plan.source == 'llm' and plan.subtasks[1].object.text() == 'blue cube'
    path, body = server.requests[0]
    assert path == '/v1/chat/completions'
    rf = body['response_format']
    assert rf['type'] == 'json_schema' and rf['json_schema']['schema']['required'] == ['subtasks']
    assert body['messages'][-1]['content'] == 'pick up the blue cube'


@pytest.mark.parametrize(
    'mode,reason,attempts',
    [
        ('invalid_json', 'invalid_json', 1),
        ('schema', 'schema', 1),
        ('oversized', 'oversized', 1),
        ('http500', 'http_5xx', 3),
        ('slow', 'timeout', None),
    ],
)
def test_each_failure_falls_back_to_rules_within_the_deadline(server, mode, reason, attempts):
    server.mode = mode
    fb = FallbackPlanner(_planner(server.url), RulePlanner(), logger=lambda m: None)
    t0 = time.monotonic()
    plan = fb.plan('put the red apple in the fridge')
    elapsed = time.monotonic() - t0
    assert plan.source == 'rules' and plan.subtasks[-1].skill == 'release'
    assert fb.fallbacks == {reason: 1}
    assert elapsed < 3 * TIMEOUT + 0.5
    if attempts is not None:
        assert len(server.requests) == attempts


def test_refused_connection_falls_back_and_opens_the_breaker():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    breaker = CircuitBreaker(failures=3, cooldown_s=60)
    llm = _planner(f'http://127.0.0.1:{port}/v1', breaker=breaker)
    warnings, infos = [], []
    fb = FallbackPlanner(llm, RulePlanner(), logger=warnings.append, info=infos.append)
    assert fb.plan('open the fridge').source == 'rules'
    assert fb.fallbacks == {'connection': 1}
    assert not breaker.allow()  # three refusals: the breaker is open
    t0 = time.monotonic()
    assert fb.plan('open the fridge').source == 'rules'
    assert fb.fallbacks['circuit_open'] == 1 and time.monotonic() - t0 < 0.1
    # no server ever answered (the default path without one): said once, at INFO
    assert warnings == [] and len(infos) == 1 and 'planning with rules' in infos[0]


def test_a_server_that_answered_and_then_fails_warns_each_time(server):
    warnings, infos = [], []
    fb = FallbackPlanner(
        _planner(server.url), RulePlanner(), logger=warnings.append, info=infos.append
    )
    assert fb.plan('pick up the blue block').source == 'llm'
    server.mode = 'http500'
    fb.plan('put the red apple in the fridge')
    fb.plan('put the red apple in the fridge')
    assert len(warnings) == 2 and infos == []
    assert all('falling back to rules' in w for w in warnings)


def test_plan_naming_objects_not_in_the_instruction_falls_back(server):
    fb = FallbackPlanner(_planner(server.url), RulePlanner(), logger=lambda m: None)
    # the server always plans "grasp the blue cube"
    assert fb.plan('pick up the blue block').source == 'llm'  # a synonym is grounded
    plan = fb.plan('put the red apple in the fridge')
    assert plan.source == 'rules' and fb.fallbacks == {'ungrounded': 1}
    assert fb.plan('抓住蓝色方块').source == 'llm'


def test_unplannable_instruction_fails_with_both_reasons(server):
    server.mode = 'schema'
    fb = FallbackPlanner(_planner(server.url), RulePlanner(), logger=lambda m: None)
    with pytest.raises(PlanError, match='no known skill'):
        fb.plan('sing a song')


def test_oversized_instruction_is_not_sent(server):
    with pytest.raises(LLMError, match='bad_instruction'):
        _planner(server.url).plan('x' * 10_000)
    assert server.requests == []


@pytest.fixture(scope='module')
def embedder():
    from wam_core.planning.embedding import SubtaskEmbedder

    return SubtaskEmbedder()


def test_the_plan_cache_reuses_a_validated_plan_for_a_near_identical_instruction(server, embedder):
    from wam_core.planning.grounding import parse_scene
    from wam_core.planning.plan_cache import PlanCache

    cache = PlanCache(embedder)
    fb = FallbackPlanner(_planner(server.url), RulePlanner(), logger=lambda m: None, cache=cache)
    scene = parse_scene(['blue cube', 'fridge'])
    assert fb.plan('pick up the blue cube', scene).source == 'llm'
    again = fb.plan('Pick up the blue cube.', scene)  # near-identical: no LLM call
    assert again.source == 'llm_cached' and len(server.requests) == 1
    assert fb.plans == {'llm': 1, 'llm_cached': 1} and cache.hits == 1
    # another task, or the same under another model version, is not a hit
    assert cache.get('pick up the green cube', 'default') is None
    assert cache.get('pick up the blue cube', 'another-model') is None
    # a cached plan is still grounded: the cube is gone from view -> no reuse, refused
    with pytest.raises(PlanError, match='no blue cube in view'):
        fb.plan('pick up the blue cube', parse_scene(['fridge']))


def test_a_trickling_server_cannot_outlive_the_planners_deadline(server):
    """Each byte arrives well within the read timeout, so only an overall deadline ends
    the call (issue 24, item 8: it used to read forever)."""
    server.mode = 'trickle'
    p = _planner(server.url, deadline_s=0.6)
    out = {}

    def call():
        t0 = time.monotonic()
        try:
            p.plan('pick up the blue cube')
        except LLMError as exc:
            out['reason'] = exc.reason
        out['took'] = time.monotonic() - t0

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(5.0)
    assert not t.is_alive(), 'the planner was still reading after 5 s'
    assert out['reason'] == 'timeout' and out['took'] < 0.6 + TIMEOUT, out


def test_an_oversized_reply_is_refused_without_reading_it_whole(server):
    server.mode = 'mebibyte'
    p = _planner(server.url)
    with pytest.raises(LLMError) as exc:
        p.plan('pick up the blue cube')
    assert exc.value.reason == 'oversized'
    # the reply is read up to the budget (and a transfer chunk), not the whole mebibyte
    assert p.last_reply_bytes <= 16_384 + 65_536 < (1 << 20), p.last_reply_bytes


def test_a_hedged_plan_starts_on_the_rules_and_keeps_the_late_llm_plan_for_next_time(
    server, embedder
):
    from wam_core.planning.plan_cache import PlanCache

    server.mode = 'late'  # answers in 0.3 s
    cache = PlanCache(embedder)
    fb = FallbackPlanner(
        _planner(server.url), RulePlanner(), logger=lambda m: None, cache=cache,
        hedge_after_s=0.1,
    )  # fmt: skip
    t0 = time.monotonic()
    first = fb.plan('pick up the blue cube')
    assert first.source == 'rules' and time.monotonic() - t0 < 0.25  # not waited for
    assert fb.fallbacks == {'hedged': 1}
    time.sleep(TIMEOUT)  # the LLM's plan arrives meanwhile
    again = fb.plan('pick up the blue cube')
    assert again.source == 'llm_cached' and fb.late_plans == 1
    assert len(server.requests) == 1  # asked once: the cache answered the second time
    # a server that times out entirely leaves nothing behind
    server.mode = 'slow'
    assert fb.plan('open the fridge').source == 'rules'
    time.sleep(TIMEOUT * 3)
    assert fb.plan('open the fridge').source == 'rules' and fb.late_plans == 1
