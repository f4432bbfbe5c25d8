"""The packages' surface, without a daemon."""
import kiln
import withruntime


def test_withruntime_reexports_the_same_names():
    from withruntime import AsyncRuntime as A, Runtime as R, Sandbox as S

    assert (R, S, A) == (kiln.Runtime, kiln.Sandbox, kiln.AsyncRuntime)
    assert withruntime.NotFoundError is kiln.NotFoundError
    assert withruntime.__version__ == kiln.__version__
