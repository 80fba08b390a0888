"""ReleaseQuestion through real rclpy: a question the server never answers is withdrawn
after its timeout and asked again, and the answer reaches the caller once."""

import os
import random
import time

import rclpy

from wam_interfaces.srv import SwitchRelease
from wam_util.executors import make_executor, spin_slice
from wam_util.release_query import ReleaseQuestion


def test_an_unanswered_question_is_withdrawn_and_asked_again():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    rclpy.init()
    try:
        asker = rclpy.create_node('asker')
        server = rclpy.create_node('expert')
        asked = []

        def status(req, res):
            asked.append(list(req.robots))
            res.success, res.active_release = True, 'v2'
            return res

        server.create_service(SwitchRelease, '/robot1/action_expert/switch_release', status)
        client = asker.create_client(SwitchRelease, '/robot1/action_expert/switch_release')
        question = ReleaseQuestion(client, robot='robot1', timeout_s=0.3)
        answers = []
        ex = make_executor()  # the asker alone: the server is silent (a hung or dead node)
        ex.add_node(asker)
        end = time.monotonic() + 5
        while not question.ask(answers.append) and time.monotonic() < end:
            spin_slice(ex, 0.05)
        assert question.in_flight, 'the service was never discovered'
        first = question._future
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.2:
            assert question.ask(answers.append)  # in flight: not sent again
            spin_slice(ex, 0.05)
        assert question._future is first and not answers
        spin_slice(ex, 0.2)
        assert question.ask(answers.append) and question._future is not first  # withdrawn
        ex.add_node(server)  # the server answers from now on
        end = time.monotonic() + 5
        while not answers and time.monotonic() < end:
            spin_slice(ex, 0.05)
        spin_slice(ex, 0.3)  # the withdrawn question's late answer must not count
        assert [a.active_release for a in answers] == ['v2'], answers
        assert not question.in_flight
        assert asked and all(r == ['robot1'] for r in asked)
        ex.shutdown()
        asker.destroy_node()
        server.destroy_node()
    finally:
        rclpy.try_shutdown()
