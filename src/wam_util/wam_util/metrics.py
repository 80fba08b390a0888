"""Prometheus metrics for a fleet dashboard (prometheus-client), off by default.

A node whose ``metrics_port`` parameter is above 0 serves ``/metrics`` on that port
(one port per node; several nodes in one process each take their own). Two kinds:

- **Latency histograms** in seconds (Prometheus' base unit), fed by the node's own
  latency windows as each sample arrives: ``wam_<stage>_seconds`` (tick, period,
  encode, fetch, plan, ...), labelled with the node's fully qualified name.
- **The typed status**, read at scrape time from the node's latest status message
  (``TypedStatus.last``), so the exporter never keeps a second set of counters: each
  ReasonCount[] field becomes ``wam_<status>_<field>_total{reason=...}`` (degraded ticks
  by reason, refusals, fallbacks, stops), each number a gauge
  ``wam_<status>_<field>`` (cache hits, calls per frame, safety stops, ...), and the
  task's ExecuteTask goal id an info-style gauge ``wam_task_info{goal_id=...} 1``. A
  status that names the model release it serves (the experts', the gate's) labels each of
  its figures with ``robot`` and ``release`` too: a canary's robots against the others.
"""

from __future__ import annotations

import re

LATENCY_BUCKETS_S = (
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.008, 0.012, 0.016, 0.02, 0.025, 0.033, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
_NUMERIC = ('int', 'uint', 'float', 'double', 'bool', 'octet')


def _name(text: str) -> str:
    return re.sub(r'[^a-zA-Z0-9_]', '_', text).strip('_').lower()


class NodeMetrics:
    def __init__(self, node, port: int):
        self.port = port
        self.enabled = port > 0
        self.node_label = node.get_fully_qualified_name()
        ns = node.get_namespace().strip('/')
        self.robot_label = ns.split('/')[0] if ns else ''
        self.logger = node.get_logger()
        self._server = None
        self._feeds: list[tuple[object, object]] = []  # (window, observer) to detach
        if not self.enabled:
            return
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry()
        self._statuses: list[tuple[str, object]] = []
        self.registry.register(_StatusCollector(self))

    def latency(self, stage: str, window, doc: str = '') -> None:
        """Observe every sample added to ``window`` (a LatencyWindow, ms) from now on."""
        if not self.enabled:
            return
        from prometheus_client import Histogram

        hist = Histogram(
            f'wam_{_name(stage)}_seconds',
            doc or f'{stage} latency, seconds',
            ['node'],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        ).labels(node=self.node_label)

        def observe(ms: float) -> None:
            hist.observe(ms * 1e-3)

        window.observers.append(observe)
        self._feeds.append((window, observe))

    def status(self, name: str, typed_status) -> None:
        """Export a TypedStatus's latest message under ``wam_<name>_...``."""
        if self.enabled:
            self._statuses.append((_name(name), typed_status))

    def start(self) -> None:
        """Serve /metrics; a port in use is a warning (the node serves on without metrics:
        in a fleet, give each robot's nodes their own ports)."""
        if not self.enabled or self._server is not None:
            return
        from prometheus_client import start_http_server

        try:
            self._server, _thread = start_http_server(self.port, registry=self.registry)
        except OSError as exc:
            self.logger.warning(f'metrics off: cannot serve on port {self.port}: {exc}')
            self.stop()

    def stop(self) -> None:
        for window, observe in self._feeds:  # nothing left feeding the hot path
            if observe in window.observers:
                window.observers.remove(observe)
        self._feeds = []
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _StatusCollector:
    def __init__(self, metrics: NodeMetrics):
        self.metrics = metrics

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        node = self.metrics.node_label
        for prefix, typed in self.metrics._statuses:
            msg = typed.last
            if msg is None:
                continue
            # a status that names the model release it serves labels every figure with the
            # robot and the release: a dashboard compares releases across a fleet (a canary)
            names, values = ['node'], [node]
            if hasattr(msg, 'release'):
                names, values = (
                    ['node', 'robot', 'release'],
                    [
                        node,
                        self.metrics.robot_label,
                        msg.release,
                    ],
                )
            for field, kind in msg.get_fields_and_field_types().items():
                value = getattr(msg, field)
                metric = f'wam_{prefix}_{field}'
                if kind.endswith('/ReasonCount>'):
                    fam = CounterMetricFamily(
                        metric, f'{prefix} {field} by reason', labels=[*names, 'reason']
                    )
                    for rc in value:
                        fam.add_metric([*values, rc.reason], rc.count)
                    yield fam
                elif field == 'goal_id':
                    fam = GaugeMetricFamily(
                        'wam_task_info', 'the latest task', labels=['node', 'goal_id']
                    )
                    fam.add_metric([node, value], 1.0)
                    yield fam
                elif kind.startswith(_NUMERIC) and field != 'level':
                    fam = GaugeMetricFamily(metric, f'{prefix} {field}', labels=names)
                    fam.add_metric(values, float(value))
                    yield fam
            fam = GaugeMetricFamily(
                f'wam_{prefix}_level', 'diagnostic level 0 OK .. 3 STALE', labels=names
            )
            fam.add_metric(values, float(msg.level))
            yield fam
