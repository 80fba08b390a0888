import os

import pytest

from wam_core.config import (
    ConfigError,
    StackConfig,
    flatten,
    load_stack_config,
    stack_config_from_dict,
    stack_config_from_flat,
)

REPO_CONFIG = os.path.join(
    os.environ.get('WAM_ROOT') or os.path.join(os.path.dirname(__file__), '..', '..', '..'),
    'config',
    'wam.yaml',
)


def test_repo_yaml_matches_the_dataclasses():
    cfg = load_stack_config(REPO_CONFIG)
    assert cfg.repr_cache.capacity == 512 and cfg.repr_cache.ttl_ms == 50.0
    assert cfg.runtime.warmup_requests == 50 and cfg.control.period_s == pytest.approx(0.02)
    assert len(cfg.control.joint_names) == 7


def test_flat_round_trip():
    cfg = StackConfig()
    flat = flatten(cfg)
    assert 'repr_cache.ttl_ms' in flat and 'experts.world.model_dir' in flat
    assert stack_config_from_flat(flat) == cfg


@pytest.mark.parametrize(
    'data,match',
    [
        ({'repr_cache': {'backend': 'redis'}}, 'backend'),
        ({'repr_cache': {'ttl_ms': -1.0}}, 'ttl_ms'),
        ({'repr_cache': {'capacity': 'many'}}, 'capacity'),
        ({'runtime': {'precision': 'int3'}}, 'precision'),
        ({'control': {'period_s': 5.0}}, 'period_s'),
        ({'control': {'joint_names': ['a', 'a']}}, 'joint_names'),
        ({'nonsense': {}}, 'unknown config key'),
    ],
)
def test_bad_values_are_refused_with_the_key_named(data, match):
    with pytest.raises(ConfigError, match=match):
        stack_config_from_dict(data)


def test_rate_meter_and_latency_window():
    from wam_core.latency import LatencyWindow, RateMeter

    r = RateMeter(window_s=2.0)
    for i in range(100):
        r.tick(10.0 + i * 0.02)  # 50 Hz for 2 s
    assert abs(r.rate(12.0) - 50.0) <= 1.0
    assert r.rate(20.0) == 0.0  # silence shows as 0 Hz
    w = LatencyWindow(size=10)
    for v in range(1, 21):
        w.add(float(v))
    s = w.summary()
    assert s['n'] == 10 and s['max'] == 20.0 and 15.0 <= s['p50'] <= 16.0
    assert w.max_ever == 20.0 and sorted(w.values()) == [float(v) for v in range(11, 21)]
