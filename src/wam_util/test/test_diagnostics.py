"""NodeDiagnostics without diagnostic_updater: the same DiagnosticArray rqt expects."""

import os
import random
import time

import rclpy
from diagnostic_msgs.msg import DiagnosticArray

from wam_util.diagnostics import NodeDiagnostics
from wam_util.executors import make_executor, spin_slice


def test_status_name_level_and_values():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    rclpy.init()
    try:
        node = rclpy.create_node('thing')
        got = []
        node.create_subscription(DiagnosticArray, '/diagnostics', got.append, 10)
        diag = NodeDiagnostics(node)
        diag.add('my task', lambda: (2, 'broken', [('rate Hz', 49.5), ('count', 3)]))
        ex = make_executor()
        ex.add_node(node)
        end = time.monotonic() + 5
        while not got and time.monotonic() < end:
            diag.publish()
            spin_slice(ex, 0.1)
        assert got, 'no diagnostics received'
        st = got[-1].status[0]
        level = st.level[0] if isinstance(st.level, bytes) else st.level
        assert st.name == 'thing: my task' and level == 2 and st.message == 'broken'
        assert st.hardware_id == '/thing'
        assert {kv.key: kv.value for kv in st.values} == {'rate Hz': '49.500', 'count': '3'}
        ex.shutdown()
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
