"""Serving logic on the hot path, without ROS: what the expert nodes run per message.

``frame_encoder`` validates a camera frame and encodes it once into the cache;
``action_ticker`` runs one 50 Hz tick against the cache (``off_tick_decoder`` runs an
action expert slower than a period off the tick, never late); ``image`` validates and
preprocesses frames; ``latency`` keeps allocation-free latency and rate statistics;
``interpreter`` holds the CPython settings (GIL switch interval, a frozen start-up heap)
a 50 Hz loop needs.
May import ``wam_core.cache``, ``wam_core.models``, ``wam_core.control``, numpy and torch.
"""
