"""Whole-stack drills and the benchmark report, through real rclpy and DDS.

``faults`` injects faults into the running stack (``make faults``), ``soak`` runs it
for minutes (``make soak``), ``evaluate`` measures task success three ways
(``make eval``), ``report`` writes ``bench/report.json``. The tests under ``test/``
run the short versions. May import every package of the workspace.
"""
