"""Typed status messages and the /diagnostics key/values built from the same message.

A node fills its status message (``WorldExpertStatus``, ``ActionExpertStatus``, ...)
once per report; ``TypedStatus`` publishes it on its topic and hands the diagnostics
task the key/values derived from its fields, so what rqt shows and what benchmarks,
drills and dashboards read cannot disagree. Readers use the message's fields; the
human-readable labels are for people only.
"""

from __future__ import annotations

from collections.abc import Callable

from wam_core.common.clock import wall_ns

from . import convert
from .diagnostics import NodeDiagnostics
from .qos import EVENTS

_SKIP = ('header', 'level', 'message')


def _label(field: str) -> str:
    words = field.split('_')
    return ' '.join({'hz': 'Hz'}.get(w, w) for w in words)


def key_values(msg) -> list[tuple[str, object]]:
    """Every field of a status message as (human-readable label, value), in field order:
    a ReasonCount[] field gives one 'field: reason' entry per reason, a LatencyStats[]
    field 'stage p50 ms', 'stage p99 ms' and 'stage max ms' per stage, a
    GateJointActivity[] field 'joint changed share', 'joint change p99' and 'joint change
    max' per joint."""
    out: list[tuple[str, object]] = []
    for field, kind in msg.get_fields_and_field_types().items():
        if field in _SKIP:
            continue
        value = getattr(msg, field)
        if kind.endswith('/ReasonCount>'):
            out += [(f'{_label(field)}: {rc.reason}', rc.count) for rc in value]
        elif kind.endswith('/LatencyStats>'):
            for s in value:
                out += [
                    (f'{s.stage} p50 ms', s.p50_ms),
                    (f'{s.stage} p99 ms', s.p99_ms),
                    (f'{s.stage} max ms', s.max_ms),
                ]
        elif kind.endswith('/GateJointActivity>'):
            for a in value:
                out += [
                    (f'{a.joint} changed share', a.changed_share),
                    (f'{a.joint} change p99', a.change_p99),
                    (f'{a.joint} change max', a.change_max),
                ]
        elif kind.endswith('/RobotEncoding>'):
            for r in value:
                out += [
                    (f'{r.robot or "robot"} {_label(k)}', getattr(r, k))
                    for k in r.get_fields_and_field_types()
                    if k != 'robot'
                ]
        else:
            out.append((_label(field), value))
    return out


class TypedStatus:
    """One typed status topic and its /diagnostics task, from one ``build()`` per report."""

    def __init__(
        self,
        node,
        diagnostics: NodeDiagnostics,
        task: str,
        msg_type,
        topic: str,
        build: Callable[[], object],
        also: tuple[str, ...] = (),
    ):
        # ``also``: more topics for the same message (a fleet's world expert reports into
        # each robot's namespace, so every robot's harness hears the expert it depends on)
        self._pubs = [node.create_publisher(msg_type, t, EVENTS) for t in (topic, *also)]
        self._build = build
        self.last = None
        diagnostics.add(task, self._report)

    def _report(self):
        msg = self._build()
        msg.header.stamp = convert.ns_to_stamp(wall_ns())
        for pub in self._pubs:
            pub.publish(msg)
        self.last = msg
        return int(msg.level), msg.message, key_values(msg)
