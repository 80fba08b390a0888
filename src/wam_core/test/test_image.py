import numpy as np
import pytest

from wam_core.models.preprocess import Preprocessor
from wam_core.serving.image import ImageError, fingerprint, frame_to_array


def _frame(h=4, w=5, pad=0):
    rgb = np.arange(h * w * 3, dtype=np.uint8).reshape(h, w, 3)
    rows = np.zeros((h, w * 3 + pad), np.uint8)
    rows[:, : w * 3] = rgb.reshape(h, -1)
    return rgb, rows.tobytes(), w * 3 + pad


def test_rgb8_with_row_padding():
    rgb, data, step = _frame(pad=3)
    out = frame_to_array('rgb8', 4, 5, step, data)
    assert np.array_equal(out, rgb)


def test_bgr8_is_swapped_to_rgb():
    rgb, data, step = _frame()
    out = frame_to_array('bgr8', 4, 5, step, data)
    assert np.array_equal(out, rgb[:, :, ::-1])


@pytest.mark.parametrize(
    'encoding,h,w,step,size,match',
    [
        ('mono8', 4, 5, 15, 60, 'unsupported encoding'),
        ('rgb8', 0, 5, 15, 0, 'bad image size'),
        ('rgb8', 4, 5, 15, 0, 'empty'),
        ('rgb8', 4, 5, 15, 59, 'data length'),
        ('rgb8', 4, 5, 12, 48, 'step'),
    ],
)
def test_bad_frames_are_rejected_with_a_reason(encoding, h, w, step, size, match):
    with pytest.raises(ImageError, match=match):
        frame_to_array(encoding, h, w, step, bytes(size))


def test_preprocess_resizes_and_normalises():
    img = np.full((64, 96, 3), 255, np.uint8)
    x = Preprocessor(128)(img)
    assert x.shape == (1, 3, 128, 128)
    assert float(x.min()) == pytest.approx(1.0) and float(x.max()) == pytest.approx(1.0)


def test_fingerprint_distinguishes_content_and_layout():
    a = bytes(60)
    b = bytes(59) + b'\x01'
    assert fingerprint('rgb8', 4, 5, a) == fingerprint('rgb8', 4, 5, a)
    assert fingerprint('rgb8', 4, 5, a) != fingerprint('rgb8', 4, 5, b)
    assert fingerprint('rgb8', 4, 5, a) != fingerprint('bgr8', 4, 5, a)
    assert len(fingerprint('rgb8', 4, 5, a)) == 32


@pytest.mark.parametrize(
    'encoding, h, w, step, size, reason',
    [
        ('mono8', 4, 4, 12, 48, 'encoding'),
        ('rgb8', 0, 4, 12, 0, 'size'),
        ('rgb8', 4, 4, 8, 32, 'step'),
        ('rgb8', 4, 4, 12, 0, 'empty'),
        ('rgb8', 4, 4, 12, 47, 'length'),
    ],
)
def test_a_rejected_frame_carries_its_reason_code(encoding, h, w, step, size, reason):
    """The rejection counters key on ImageError.reason (issue 24, item 12: the reason was
    recovered by matching words in the message)."""
    with pytest.raises(ImageError) as exc:
        frame_to_array(encoding, h, w, step, bytes(size))
    assert exc.value.reason == reason


def test_the_safety_numbers_are_named_described_parameters():
    """No unnamed constant decides what is safe (issue 24, item 12): each is a parameter of
    its node's schema, with a description, and config/wam.yaml sets it."""
    from wam_core.common.config import NODE_SCHEMAS
    from wam_core.common.params import leaves, node_values, read_param_file
    from wam_core.common.paths import default_config

    wanted = {
        'world_expert': ['frame_checks.frozen_motion_rad', 'frame_checks.max_future_ms'],
        'action_expert': ['control.max_command_deviation', 'control.contact_noise_fraction'],
        'harness': [
            'control.max_command_deviation',
            'control.contact_noise_fraction',
            'safety.watchdog_period_s',
            'safety.diagnostics_queue_depth',
        ],
    }
    blocks = read_param_file(default_config())
    for node, names in wanted.items():
        schema = {leaf.name: leaf for leaf in leaves(NODE_SCHEMAS[node])}
        values = node_values(blocks, node)
        in_file = {**values['shared'], **values['own']}
        for name in names:
            assert name in schema and len(schema[name].spec.description) > 30, (node, name)
            assert in_file[name] == schema[name].default, (node, name)
    world = {leaf.name for leaf in leaves(NODE_SCHEMAS['world_expert'])}
    assert 'repr_cache.mooncake.objects_per_robot' in world
