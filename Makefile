# Mooncake-SG. The two commands a newcomer runs: `make demo` and `make test`.
SHELL := /bin/bash
ENV := source scripts/env.sh
DEMO_ARGS ?=
.PHONY: setup demo demo-multi test test-llm bench clean

setup:
	@bash scripts/setup.sh

demo: setup                       ## the hot path on the synthetic robot, one process
	@$(ENV) && python -m robot_agent.stack $(DEMO_ARGS)

demo-multi: setup                 ## the same with one process per expert and the shm cache
	@$(ENV) && python -m robot_agent.stack --mode multi $(DEMO_ARGS)

test: setup                       ## colcon build + colcon test + colcon test-result
	@bash scripts/run_tests.sh

test-llm: setup                   ## opt-in: the LLM planner against a real llama.cpp server (builds it once)
	@bash scripts/test_llm.sh

bench: setup                      ## hot-path and harness benchmarks -> bench/report.json
	@$(ENV) && python bench/hot_path.py && python bench/harness.py && python bench/closed_loop.py

clean:
	rm -rf build install log
	rm -f .venv/.wam-stamps/build
