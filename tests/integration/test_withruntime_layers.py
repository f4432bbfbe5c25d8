"""The reference client's vendor layers, image and snapshot paths (samples
l1-l6 in withruntime_samples/, listed in test_withruntime_client.py's
docstring). A module of its own, with its own venv of the client: under
pytest-xdist a module's tests share one worker, and these builds beside the
doc samples made that worker the parallel part's last by minutes."""
import pytest

from test_withruntime_client import SAMPLES, _run, client_env, venv_python  # noqa: F401 (fixtures)

LAYERS = sorted(p.name for p in SAMPLES.glob("l*.py"))


def test_every_layer_is_here():
    assert [name[:2] for name in LAYERS] == ["l1", "l2", "l3", "l4", "l5", "l6"], LAYERS


@pytest.mark.parametrize("sample", LAYERS)
def test_layer_sample(sample, venv_python, client_env):  # noqa: F811
    _run(venv_python, SAMPLES / sample, client_env)
