"""Whether ``torch.compile`` runs here, for the tests of the library's compiled paths (skipped where it cannot)."""

import pytest
import torch


def compile_works() -> bool:
    """Whether torch.compile (dynamo and the inductor CPU backend, which needs a C++ compiler) runs on this platform."""
    if not torch._dynamo.is_dynamo_supported():
        return False
    try:
        return bool(torch.compile(lambda x: x + 1)(torch.zeros(2)).eq(1).all())
    except Exception:
        return False


needs_compile = pytest.mark.skipif("not compile_works()", reason="torch.compile is unavailable on this platform")
