"""Model releases: the registry of world/action pairs and their audit (``registry``),
loading a release beside the served one (``loading``), and a canary's objectives
(``objectives``).

May import: the standard library (sqlite3), ``wam_core.common`` and ``wam_core.models``
(manifests; the conformance kit, lazily, when a pair is registered). Never ROS: the
release manager that drives the nodes lives in ``robot_agent``.
"""
