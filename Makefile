# Mooncake-SG. The two commands a newcomer runs: `make demo` and `make test`.
SHELL := /bin/bash
ENV := source scripts/env.sh
DEMO_ARGS ?=
# MODEL=pi0: serve the tiny π0 (config/pi0.yaml; models/pi0_tiny, written on first use)
MODEL_ARG = $(if $(MODEL),--model $(MODEL))
.PHONY: setup demo demo-multi demo-fleet test test-llm bench data train dagger eval faults releases soak clean

setup:
	@bash scripts/setup.sh

demo: setup                       ## the whole task on the simulated robot, one process (PLANNER=llm: with the local LLM server; MODEL=pi0: the tiny π0)
	@$(if $(filter llm,$(PLANNER)),bash scripts/setup_llm.sh && )$(ENV) && python -m robot_agent.stack $(MODEL_ARG) $(if $(PLANNER),--planner $(PLANNER)) $(DEMO_ARGS)

demo-multi: setup                 ## the same with a process per node (experts, gate, task manager) and the shm cache
	@$(ENV) && python -m robot_agent.stack --mode multi $(MODEL_ARG) $(DEMO_ARGS)

demo-fleet: setup                 ## ROBOTS simulated tabletops (default 2), one world expert, an action expert and a gate each, the task managers in one process
	@$(ENV) && python -m robot_agent.fleet --robots $(or $(ROBOTS),2) $(MODEL_ARG) $(FLEET_ARGS)

test: setup                       ## ruff + colcon build + colcon test + colcon test-result
	@bash scripts/run_tests.sh

test-llm: setup                   ## opt-in: the LLM planner against a real llama.cpp server (builds it once)
	@bash scripts/test_llm.sh

bench: setup                      ## conformance kit, planner quality, the world forward, hot-path (one and two views), harness, closed-loop, π0 and fleet-capacity benchmarks -> bench/report.json
	@$(ENV) && python bench/models.py && python bench/planner.py && python bench/world_forward.py && python bench/hot_path.py && python bench/harness.py && python bench/closed_loop.py && python bench/pi0.py && python bench/fleet.py && python bench/render_report.py

data: setup                       ## record scripted demonstrations in the sim -> datasets/pick_place
	@$(ENV) && python -m wam_learning.dataset $(DATA_ARGS)

train: setup                      ## behaviour cloning of both experts -> models/ (records the data first if missing)
	@$(ENV) && { [ -f datasets/pick_place/manifest.json ] || python -m wam_learning.dataset; } && python -m wam_learning.train $(TRAIN_ARGS)

dagger: setup                     ## one DAgger round on models/: on-policy episodes labelled by the expert, then fine-tune
	@$(ENV) && rm -rf datasets/pick_place_dagger && python -m wam_learning.dagger $(DAGGER_ARGS) && \
	  python -m wam_learning.train --init models --data datasets/pick_place,datasets/pick_place_dagger \
	    --steps $(or $(DAGGER_STEPS),700) --lr 3e-4

eval: setup                       ## success over 50 held-out episodes: ROS 2 stack / direct policy / unified baseline
	@$(ENV) && python -m wam_system_tests.evaluate $(EVAL_ARGS) && python bench/render_report.py

faults: setup                     ## inject every fault: the multi-process stack on the sim, then a 2-robot fleet on the Mooncake Store (~4 min per round; REPEAT=20 rounds)
	@$(ENV) && python -m wam_system_tests.faults --repeat $(or $(REPEAT),1) $(FAULT_ARGS); rc=$$?; python bench/render_report.py; exit $$rc

releases: setup                   ## the model-release drill on a 2-robot fleet: switches, rollbacks, bad canaries (REPEAT=10 rounds, ~35 s each)
	@$(ENV) && python -m wam_system_tests.releases_drill --repeat $(or $(REPEAT),10) $(RELEASE_ARGS); rc=$$?; python bench/render_report.py; exit $$rc

soak: setup                       ## the full stack on the sim for SOAK_MINUTES (default 30): growth and drift
	@$(ENV) && python -m wam_system_tests.soak --minutes $(or $(SOAK_MINUTES),30); rc=$$?; python bench/render_report.py; exit $$rc

clean:
	rm -rf build install log
	rm -f .venv/.wam-stamps/build
