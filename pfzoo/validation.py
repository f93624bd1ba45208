"""Input checks at public boundaries.

Every check raises ``ValueError`` naming the argument and what was expected, so a user who
passes a wrong tensor learns which one and why, instead of meeting a shape error deep
inside a matrix product.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import math
import re
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

import numpy as np
import torch

from pfzoo.sampling import ChainStreams

MODEL_DTYPES = (torch.float32, torch.float64)
"""The dtypes a model computes in: float16/bfloat16 keep 3 or 2 significant digits, too few for the log-sum-exps and
enumerations behind log-likelihoods (and float16 overflows at 65504); integers carry no gradients."""

_DESCRIBED_LENGTH = 80
"""The most characters of a value's ``repr`` a message quotes."""


def describe(value) -> str:
    """A one-line description of a value for an error message: a tensor or array by type, shape and dtype (their
    ``repr`` runs over many lines), anything else by its ``repr`` on one line, cut at 80 characters."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return f"a {type(value).__name__} of shape {tuple(value.shape)} and dtype {value.dtype}"
    text = " ".join(repr(value).split())
    return text if len(text) <= _DESCRIBED_LENGTH else text[: _DESCRIBED_LENGTH - 1] + "…"


_values_checked: ContextVar[bool] = ContextVar("pfzoo_values_checked", default=False)


@contextmanager
def values_checked() -> Iterator[None]:
    """Within this context :func:`check_matrix` and :func:`check_binary` skip their scans of the values (finite,
    binary) and :func:`checking_values` is false; types, shapes, dtypes and devices are still checked.

    For loops over inputs checked once on entry (the Trainer checks each data split before its first epoch): a scan
    reads its verdict back from the device, a host sync per call that would stall a GPU at every step."""
    token = _values_checked.set(True)
    try:
        yield
    finally:
        _values_checked.reset(token)


def checking_values() -> bool:
    """Whether checks that read tensor values back to the host should run (false inside :func:`values_checked`)."""
    return not _values_checked.get()


def all_finite(x: torch.Tensor) -> bool:
    """Whether every entry of the floating-point ``x`` is finite, from one ``aminmax`` pass: its min and max are NaN when
    any entry is NaN (torch's reductions propagate NaN) and ±inf when any is. ``isfinite(x).all()`` gives the same answer
    eight times slower on the CPU (0.61 against 0.076 s for the 50,000 × 784 float64 MNIST training set, one thread),
    which every estimator call paid on its data."""
    if x.numel() == 0:
        return True
    low, high = torch.aminmax(x)
    return bool(torch.isfinite(low) & torch.isfinite(high))


def check_matrix(
    x: torch.Tensor,
    name: str,
    *,
    width: int | None = None,
    device: torch.device | None = None,
    dtype: torch.dtype | None = None,
    allow_empty: bool = True,
) -> torch.Tensor:
    """Check that ``x`` is a finite floating-point ``[B, width]`` tensor on ``device`` with ``dtype``.

    The one dtype rule of the library: a tensor whose dtype differs from the model's is refused in one
    line naming both dtypes (never cast silently). ``allow_empty=False`` also refuses ``B = 0``.
    Returns ``x`` unchanged so the call can be used inline.
    """
    _check_matrix_form(x, name, width=width, device=device, dtype=dtype, allow_empty=allow_empty)
    if checking_values() and not all_finite(x):
        raise ValueError(f"{name} contains NaN or infinite values")
    return x


def _check_matrix_form(x: torch.Tensor, name: str, *, width: int | None, device: torch.device | None,
                       dtype: torch.dtype | None, allow_empty: bool) -> None:
    """:func:`check_matrix` without reading the values: type, shape, dtype, device and (``allow_empty=False``) rows."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name} must have shape [batch, {width or 'features'}], got shape {tuple(x.shape)}")
    if width is not None and x.shape[1] != width:
        raise ValueError(f"{name} must have {width} columns (shape [batch, {width}]), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.device.type == "meta":
        raise ValueError(f"{name} is on the meta device (a shape without values), expected a tensor on {device or 'cpu or cuda'}")
    if device is not None and x.device != torch.device(device):
        raise ValueError(f"{name} is on device {x.device}, expected {device} (the model's device)")
    check_dtype(x, name, dtype)
    if not allow_empty:
        check_nonempty(x, name)


def check_representable(x: torch.Tensor, name: str, owner: str) -> torch.Tensor:
    """Refuse (one line naming ``name`` and the limit) entries of a real-valued ``x`` so large that an energy quadratic
    in them overflows ``x``'s dtype: past ``√(max float) / 10³`` (about 1.8·10¹⁶ in float32, 1.3·10¹⁵¹ in float64) a
    squared entry summed over units and scaled by parameters reaches infinity, and the free energy or log-density
    would come back ±inf without a word. ``owner`` names the model. Checked outside the Trainer's steps only."""
    if checking_values() and x.numel():
        limit = torch.finfo(x.dtype).max ** 0.5 / 1e3
        largest = x.abs().max()
        if largest > limit:
            raise ValueError(f"{name} has entries as large as {largest.item():.3g}, past what {owner}'s energies can hold in "
                             f"{x.dtype} (|entries| ≤ {limit:.2g}: their squares would overflow); rescale the data, e.g. standardise it")
    return x


def check_binary(
    x: torch.Tensor,
    name: str,
    *,
    width: int | None = None,
    device: torch.device | None = None,
    dtype: torch.dtype | None = None,
    allow_empty: bool = True,
) -> torch.Tensor:
    """Like :func:`check_matrix`, and also require every entry to be exactly 0 or 1 (which makes it finite: NaN and ±inf
    equal neither, so one pass checks both)."""
    _check_matrix_form(x, name, width=width, device=device, dtype=dtype, allow_empty=allow_empty)
    if checking_values() and not ((x == 0) | (x == 1)).all():
        if not all_finite(x):
            raise ValueError(f"{name} contains NaN or infinite values")
        raise ValueError(f"{name} must be binary (every entry 0 or 1); binarise the data first")
    return x


def check_generator(generator, device: torch.device) -> None:
    """Check that a random generator, if given, lives on the device it will draw for: a ``torch.Generator``, or the
    :class:`~pfzoo.sampling.ChainStreams` of a batch of chains (whose draws the samplers split by block)."""
    if generator is None:
        return
    if isinstance(generator, ChainStreams):
        generator = generator.generators[0]
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if torch.device(generator.device).type != torch.device(device).type:
        raise ValueError(f"generator is on device {generator.device}, expected a generator on {device}")


def integer_hint(value: object) -> str:
    """For a whole-number float such as 1e5 (how papers write K, and what a YAML or command-line ``1e5`` parses to): a
    hint to write it as an integer; else nothing."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return f" (a float; write it as the integer {int(value)})"
    return ""


def check_positive_int(value: int, name: str) -> int:
    """Require a positive Python integer (bools are rejected)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {describe(value)}{integer_hint(value)}")
    return value


def check_non_negative_int(value: int, name: str) -> int:
    """Require a Python integer ≥ 0 (bools are rejected): a count where 0 means "none"."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer (0: none), got {describe(value)}{integer_hint(value)}")
    return value


def check_sample_count(value: int, name: str) -> int:
    """Require at least two independent chains or samples: fewer give no standard error."""
    check_positive_int(value, name)
    if value < 2:
        raise ValueError(f"{name} must be at least 2 to report a standard error, got {value}")
    return value


def check_beta(beta: float, name: str = "beta") -> float:
    """Require an inverse temperature in [0, 1]."""
    beta = check_finite_number(beta, name)
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {beta}")
    return beta


def check_layer_sizes(
    layer_sizes, num_visible: int | None, hidden_sizes, *, min_layers: int
) -> list[int]:
    """``[V, H1, …]`` from ``layer_sizes``, or from ``num_visible`` and ``hidden_sizes`` (how the app builds
    layered models, V coming from the data set); at least ``min_layers`` positive sizes."""
    if layer_sizes is None:
        if num_visible is None or hidden_sizes is None:
            raise ValueError("layer_sizes is required (or num_visible together with hidden_sizes)")
        layer_sizes = [num_visible, *hidden_sizes]
    else:
        if hidden_sizes is not None:
            raise ValueError("give either layer_sizes or num_visible with hidden_sizes, not both")
        layer_sizes = list(layer_sizes)
        if num_visible is not None and layer_sizes and layer_sizes[0] != num_visible:
            raise ValueError(f"num_visible={num_visible!r} disagrees with layer_sizes[0]={layer_sizes[0]!r}")
    if len(layer_sizes) < min_layers:
        words = {2: "two", 3: "three"}
        raise ValueError(f"layer_sizes must list at least {words.get(min_layers, min_layers)} layers [V, H1, ...], got {layer_sizes}")
    for index, size in enumerate(layer_sizes):
        check_positive_int(size, f"layer_sizes[{index}]")
    return [int(size) for size in layer_sizes]


def check_dtype(x: torch.Tensor, name: str, dtype: torch.dtype | None) -> torch.Tensor:
    """The one dtype rule: refuse a tensor whose dtype is not the model's, naming both dtypes."""
    if dtype is not None and x.dtype != dtype:
        raise ValueError(f"{name} has dtype {x.dtype} but the model is {dtype}; convert with {name}.to(model.dtype)")
    return x


def check_model_dtype(dtype: torch.dtype, name: str) -> torch.dtype:
    """Require one of :data:`MODEL_DTYPES` for the dtype ``name`` gives a model (its own, or that of the weights it is
    built from); returns it."""
    if dtype not in MODEL_DTYPES:
        raise ValueError(f"{name} has dtype {dtype}; pfzoo models compute in torch.float32 or torch.float64 "
                         f"(convert with .float() or .double())")
    return dtype


def check_computable(device: torch.device, dtype: torch.dtype, name: str = "model") -> None:
    """Refuse to compute with a model on the meta device (shapes without values: fine for sizing a model, not for
    numbers) or in a dtype outside :data:`MODEL_DTYPES`, naming ``name``."""
    if torch.device(device).type == "meta":
        raise ValueError(f"{name} is on the meta device (shapes without values) and cannot compute; "
                         f"use {name}.to_empty(device='cpu') and load its weights first")
    check_model_dtype(dtype, name)


_ALLOCATION_FAILURES = ("can't allocate memory", "not enough memory", "out of memory")


class AllocationError(ValueError):
    """A size argument asked for more memory than the device has (raised by :func:`allocating`)."""

    def __init__(self, name: str, value, asked: str) -> None:
        self.asked = asked
        amount = f" (one allocation asked for {asked})" if asked else ""
        super().__init__(f"{name}={describe(value)} needs more memory than the device has{amount}; lower {name}")


@contextmanager
def allocating(name: str, value: int) -> Iterator[None]:
    """Turn an allocator failure inside the block into a one-line :class:`AllocationError` (a ``ValueError``) naming the
    size argument ``name`` (``num_chains``, ``num_samples``, ...) whose ``value`` asked for the memory, with the bytes the
    allocator was asked for: ``torch.OutOfMemoryError`` on a GPU, a ``RuntimeError`` from the CPU allocator. Other
    errors pass unchanged; nested blocks blame the outermost argument (the user's ``num_chains`` of an estimator, not
    the ``num_samples`` it passes on to a base sampler).

    Wrap where a sampler or estimator allocates its chains, so a size too large for the machine is blamed on the
    argument rather than on an allocator deep inside torch."""
    try:
        yield
    except AllocationError as error:
        raise AllocationError(name, value, error.asked) from error.__cause__
    except RuntimeError as error:  # torch.OutOfMemoryError is a RuntimeError
        text = str(error)
        if not isinstance(error, torch.OutOfMemoryError) and not any(words in text for words in _ALLOCATION_FAILURES):
            raise
        asked = re.search(r"allocate (\d+) bytes", text) or re.search(r"(?i)tried to allocate ([\d.]+ [KMGTP]?i?B)", text)
        amount = "" if asked is None else asked.group(1) + (" bytes" if asked.group(1).isdigit() else "")
        raise AllocationError(name, value, amount) from error


def allocates(name: str) -> Callable[[Callable], Callable]:
    """:func:`allocating` as a decorator, for a function or method whose argument ``name`` (``num_samples``) sizes what
    it allocates: ``@allocates("num_samples")`` above ``def sample(self, num_samples, ...)``."""

    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def wrapped(*args, **kwargs):
            with allocating(name, signature.bind_partial(*args, **kwargs).arguments.get(name)):
                return function(*args, **kwargs)

        return wrapped

    return decorate


def check_nonempty(x: torch.Tensor, name: str) -> torch.Tensor:
    """Refuse a batch without rows (``[0, ...]``): means and log-mean-exps of nothing are NaN or errors."""
    if x.dim() == 0 or x.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one row, got shape {tuple(x.shape)}")
    return x


def check_finite_number(
    value, name: str, *, minimum: float | None = None, maximum: float | None = None, exclusive: bool = False
) -> float:
    """Require a finite real number (not a bool), at least ``minimum`` (above it when ``exclusive``) and at most
    ``maximum``; returns it as a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) and not (
        isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype != torch.bool
    ):
        raise ValueError(f"{name} must be a finite number, got {describe(value)}")
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{name} must be a finite number, got {number}")
    if minimum is not None and (number <= minimum if exclusive else number < minimum):
        relation = "greater than" if exclusive else "at least"
        raise ValueError(f"{name} must be {relation} {minimum:g}, got {number:g}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{name} must be at most {maximum:g}, got {number:g}")
    return number


def check_step_size(value, name: str = "step_size") -> float | torch.Tensor:
    """A kernel's step: a positive finite number (returned as a float), or a 0-dim floating-point tensor kept as it is (a
    step adapted on the chains' device between calls, never read back)."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 0 or not value.is_floating_point():
            raise ValueError(f"{name} must be a number or a 0-dim floating-point tensor, got a {value.dtype} tensor of shape {tuple(value.shape)}")
        return value
    return check_finite_number(value, name, minimum=0.0, exclusive=True)


def check_choice(value, name: str, choices) -> str:
    """Require one of the strings ``choices``; anything else is refused naming ``name`` (an array too, which ``in``
    would compare element by element into an ambiguous truth value)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {describe(value)}")
    return value


def check_bool(value, name: str) -> bool:
    """Require a real boolean (``True``/``False``); strings such as ``"yes"`` or numbers are refused."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {describe(value)}")
    return value


def check_tensors(**tensors) -> None:
    """Require every keyword argument to be a ``torch.Tensor`` (``check_tensors(weight=w, bias=b)``)."""
    for name, value in tensors.items():
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
        if value.device.type == "meta":
            raise ValueError(f"{name} is on the meta device (a shape without values), expected a tensor on cpu or cuda")
