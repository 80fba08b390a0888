"""Requests no planner may turn into motion: changing limits, silencing the safety stop,
overriding the planner's own instructions.

Checked on the instruction before any planner sees it (an LLM can be talked into
anything; the rules could read a harmless clause out of a harmful sentence). A match
refuses the whole instruction with the reason; the robot's limits and its safety stop
are configuration and hardware, never a task.
"""

from __future__ import annotations

import re

# tampering verbs + anything of the safety system, within one sentence
_TAMPER = re.compile(
    r'\b(?:ignore|ignoring|disable|disabling|override|overriding|bypass|bypassing|'
    r'turn(?:ing)? off|switch(?:ing)? off|deactivate|disregard|forget)\b'
    r'[^.!?;]{0,40}?\b(?:safety|limits?|stop|e-?stop|emergency|gate|clamp(?:ing)?|'
    r'monitor|watchdog|instructions?|rules?)\b',
    re.IGNORECASE,
)
# adjusting verbs + only what is unambiguously a limit or the stop ("set the cup next
# to the monitor" is a task, "set the velocity limit to 10" is not)
_ADJUST = re.compile(
    r'\b(?:set|change|raise|increase|exceed|remove|lift|relax|double)\b'
    r'[^.!?;]{0,40}?\b(?:limits?|safety|e-?stop|emergency stop|watchdog|clamping gate)\b',
    re.IGNORECASE,
)
_ZH = re.compile(
    r'(?:忽略|无视|关闭|关掉|禁用|绕过|解除|取消|修改|提高|超过|不要管)'
    r'.{0,12}?(?:安全|限位|限制|限速|急停|停止|保护|规则|指令)'
)


def unsafe_reason(instruction: str) -> str | None:
    """Why the instruction must not be planned (it tampers with safety), or None."""
    m = _TAMPER.search(instruction) or _ADJUST.search(instruction) or _ZH.search(instruction)
    if m is None:
        return None
    return (
        f'refused: {m.group(0)!r} asks to change or bypass the safety system; limits and '
        'the safety stop are configuration, not a task'
    )
