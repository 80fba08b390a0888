"""Status levels, as diagnostic_msgs/DiagnosticStatus numbers them.

Every node reports one of these on /diagnostics and in its typed status; the safety
monitor stops the robot on ERROR or STALE from a node it depends on.
"""

OK, WARN, ERROR, STALE = 0, 1, 2, 3
LEVEL_NAMES = {OK: 'OK', WARN: 'WARN', ERROR: 'ERROR', STALE: 'STALE'}
