import os

import pytest

os.environ.setdefault('OMP_NUM_THREADS', '1')
os.environ.setdefault('TRANSFORMERS_VERBOSITY', 'error')


@pytest.fixture(scope='session')
def models(tmp_path_factory):
    """Seeded default models written fresh for the test session."""
    from wam_core.models.default_models import write_default_models

    return write_default_models(str(tmp_path_factory.mktemp('models')), seed=0)
