import logging
import os
import pathlib

import pytest
import torch

# Tests run small tensors; one intra-op thread avoids OpenMP spin-waiting when the machine is
# shared, and keeps results independent of the thread count.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def seed_everything():
    """Every test starts from the same global RNG state (tests still pass explicit generators)."""
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def one_thread_after_every_test():
    """A test that runs a script's ``main`` in-process may leave torch at more intra-op threads (``--threads``, or
    :func:`pfzoo.studies.reporting.pick_threads` choosing 2); float32 products round differently with the thread count, so
    the next test in that worker would see other bits (a bit-for-bit comparison of a plain and a one-rank run failed so)."""
    yield
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def no_hydra_job_left_behind():
    """A test that runs a ``hydra.main`` app in-process leaves Hydra's job config set, and the next test in that worker
    would read it as its own (``HydraConfig.initialized()``: a run folder, a model choice); clear it after every test."""
    yield
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().cfg = None


@pytest.fixture(autouse=True)
def no_log_handler_left_behind():
    """An in-process ``hydra.main`` run configures the root logger (Hydra's job logging) with a handler on the stream the
    test captured; after the test that stream is closed, and the next ``logger.info`` in that worker writes "--- Logging
    error ---" to stderr. Remove the logging handlers a test added to the root logger and restore its level (pytest's
    own capture handlers, from ``_pytest``, are left to pytest)."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for handler in [h for h in root.handlers if h not in before and not type(h).__module__.startswith("_pytest")]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level)


@pytest.fixture(scope="session")
def shared_data_root() -> pathlib.Path:
    """The reference data folder: ``$PFZOO_DATA``, else ``<repo>/../shared/data``; skip when absent."""
    env = os.environ.get("PFZOO_DATA")
    root = pathlib.Path(env).expanduser() if env else pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"
    if not root.is_dir():
        source = "$PFZOO_DATA" if env else "<repo>/../shared/data"
        pytest.skip(f"reference data folder {root} ({source}) is absent; set PFZOO_DATA to run data tests")
    return root


@pytest.fixture
def float64_default_dtype():
    """torch's default dtype float64 for one test (modules opt in with ``pytestmark = pytest.mark.usefixtures(...)``)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)
