"""Turning an instruction into conditioned subtasks, without ROS.

``plan`` is the plan schema and its validation, ``rules`` the deterministic planner,
``llm`` the OpenAI-compatible LLM planner with retries, circuit breaker and the rule
fallback, ``embedding`` the subtask embeddings (all-MiniLM-L6-v2) that condition the
action expert. May import httpx, torch, transformers, numpy and ``wam_core.common``.
"""
