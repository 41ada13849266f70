"""Fuzzed benchmark inputs, draw-for-draw identical to ``torch.utils.benchmark``'s fuzzer.

A :class:`Fuzzer` samples named :class:`FuzzedParameter` values, resolves
:class:`ParameterAlias` references, rejects candidates that break the constraints, and builds
the :class:`FuzzedTensor` inputs from the accepted values.

For the same ``seed`` every draw matches torch's implementation: parameters and layouts come
from a ``numpy.random.RandomState(seed)`` consumed in exactly torch's order, and tensor values
come from a torch CPU generator seeded from that state exactly as torch seeds its global one.

One deliberate difference: torch reseeds the *global* torch generator in ``take()``. opbench
keeps the fuzzer's torch stream private: while a step's tensors are built, the global CPU
generator is swapped to the fuzzer's stream and the caller's state is put back afterwards (also
on error). Values still equal torch's, the caller's RNG is left as it was, and code that draws
random numbers between steps no longer perturbs the next fuzzed tensors. CUDA generators are
never touched (tensors are built on the CPU and then moved, as in torch).

Example::

    from opbench.fuzz.fuzzer import Fuzzer, FuzzedParameter, FuzzedTensor
    fuzzer = Fuzzer(
        parameters=[FuzzedParameter("k0", minval=1, maxval=64, distribution="loguniform")],
        tensors=[FuzzedTensor("x", size=("k0", 4))],
        seed=0,
    )
    for tensors, properties, params in fuzzer.take(3):
        print(tensors["x"].shape, properties["x"]["is_contiguous"], params["k0"])
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Callable, Union

from opbench.errors import FuzzerSpecError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy
    import torch as _torch_t

__all__ = ["FuzzedParameter", "FuzzedTensor", "Fuzzer", "ParameterAlias"]

_INSTALL_HINT = "opbench.fuzz.fuzzer needs torch (and numpy): pip install torch"

# Bound by _require() on first use, so that importing this module never imports torch.
torch: Any = None
np: Any = None


def _require() -> None:
    """Import torch and numpy on first use; fail with an install hint when they are missing."""
    global torch, np
    if torch is not None:
        return
    try:
        import numpy as numpy_mod
        import torch as torch_mod
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    np, torch = numpy_mod, torch_mod


# torch retries a step this many times before giving up; the number is part of parity because
# `rejection_rate` and the error both depend on it.
_MAX_CANDIDATES = 1000
_DISTRIBUTIONS = ("loguniform", "uniform")


class ParameterAlias:
    """Make a parameter take the value of another parameter.

    Used as a key of a dict distribution, so that e.g. ``y_len`` is either 1 (broadcasting) or
    equal to ``x_len``. Chains are allowed; cycles raise ``ValueError`` when drawn.

    Example::

        FuzzedParameter("y_len", distribution={1: 0.5, ParameterAlias("x_len"): 0.5})
    """

    def __init__(self, alias_to: str) -> None:
        self.alias_to = alias_to

    def __repr__(self) -> str:
        return f"ParameterAlias[alias_to: {self.alias_to}]"


class FuzzedParameter:
    """A named value drawn from ``uniform``, ``loguniform`` or a custom discrete distribution.

    - ``"uniform"``: integers in ``[minval, maxval]`` when both bounds are ``int``, otherwise a
      continuous float in ``[minval, maxval)``.
    - ``"loguniform"``: an ``int`` whose log2 is uniform, clamped to ``[minval, maxval]``.
    - dict: keys are the choices (may be :class:`ParameterAlias`), values their probabilities;
      they must be non-negative and sum to one, and ``minval``/``maxval`` must be ``None``.

    ``strict`` parameters keep their first draw while the :class:`Fuzzer` resamples the others
    to satisfy constraints (this avoids e.g. biasing towards fewer dimensions).

    Example::

        import numpy as np
        p = FuzzedParameter("n", minval=16, maxval=4096, distribution="loguniform")
        p.sample(np.random.RandomState(0))  # -> 335
    """

    def __init__(
        self,
        name: str,
        minval: int | float | None = None,
        maxval: int | float | None = None,
        distribution: str | dict[Any, float] | None = None,
        strict: bool = False,
    ) -> None:
        _require()
        self._name = name
        self._minval = minval
        self._maxval = maxval
        self._distribution = self._check_distribution(distribution)
        self.strict = strict
        self._sampler = self._make_sampler()

    @property
    def name(self) -> str:
        return self._name

    def sample(self, state: numpy.random.RandomState) -> Any:
        """Draw one value from ``state`` (consumes exactly the draws torch's version does)."""
        return self._sampler(state)

    def _check_distribution(self, distribution: Any) -> Any:
        # torch 2.13.0 inverts the normalisation test (it raises for every distribution that
        # *does* sum to one); this is the intended check.
        if isinstance(distribution, dict):
            if any(p < 0 for p in distribution.values()):
                raise FuzzerSpecError(f"{self._name}: probabilities cannot be negative")
            total = sum(distribution.values())
            if abs(total - 1) > 1e-5:
                raise FuzzerSpecError(
                    f"{self._name}: distribution is not normalized (probabilities sum to "
                    f"{total}, they must sum to 1)")
            for bound in ("minval", "maxval"):
                if getattr(self, f"_{bound}") is not None:
                    raise FuzzerSpecError(
                        f"{self._name}: when passing a custom distribution, '{bound}' must be None")
            return distribution
        if distribution not in _DISTRIBUTIONS:
            raise FuzzerSpecError(
                f"Unknown distribution: {distribution!r} (parameter {self._name!r}); use "
                "'uniform', 'loguniform' or a dict mapping values to probabilities")
        # torch only fails on these when sampling, with an unrelated numpy error.
        if self._minval is None or self._maxval is None:
            raise FuzzerSpecError(
                f"{self._name}: a {distribution} distribution needs both minval and maxval")
        if distribution == "loguniform" and self._minval <= 0:
            raise FuzzerSpecError(f"{self._name}: loguniform needs minval > 0, got {self._minval}")
        if self._is_integer_range() and self._minval > self._maxval:
            raise FuzzerSpecError(
                f"{self._name}: minval ({self._minval}) is greater than maxval ({self._maxval})")
        return distribution

    def _is_integer_range(self) -> bool:
        return isinstance(self._minval, int) and isinstance(self._maxval, int)

    def _make_sampler(self) -> Callable[[Any], Any]:
        """Precompute per-distribution constants so that each draw is one RNG call."""
        minval, maxval = self._minval, self._maxval
        if minval is None or maxval is None:  # a dict distribution: no bounds used
            minval = maxval = 0
        if isinstance(self._distribution, dict):
            choices = list(self._distribution)
            # numpy's RandomState.choice(p=...) draws one random_sample() and returns the first
            # index whose normalised cumulative probability exceeds it; doing the same on a
            # precomputed list gives the same index without choice()'s per-call validation.
            cdf = np.asarray(tuple(self._distribution.values()), dtype=np.float64).cumsum()
            cdf /= cdf[-1]
            edges = cdf.tolist()
            return lambda state: choices[bisect.bisect_right(edges, state.random_sample())]
        if self._distribution == "uniform":
            if self._is_integer_range():
                return lambda state: int(state.randint(low=minval, high=maxval + 1))
            return lambda state: state.uniform(low=minval, high=maxval)
        # loguniform: torch recomputes both logarithms on every draw.
        low, high = float(np.log2(minval)), float(np.log2(maxval))

        def loguniform(state: Any) -> Any:
            value = int(2 ** state.uniform(low=low, high=high))
            # Truncation and rounding can step outside the bounds; torch clamps to the bound
            # objects themselves (so a float bound comes back as that float).
            if value < minval:
                return minval
            if value > maxval:
                return maxval
            return value

        return loguniform


def _dtype_size(dtype: _torch_t.dtype) -> int:
    """Bytes per element as torch's fuzzer counts them for ``max_allocation_bytes``.

    Kept identical to torch (which counts a complex element as the size of its real part) because
    the constraint decides which candidates are accepted, and so every later draw.
    """
    if dtype == torch.bool:
        return 1
    if dtype.is_floating_point or dtype.is_complex:
        return torch.finfo(dtype).bits // 8
    return torch.iinfo(dtype).bits // 8


def _prod(values: Sequence[int], base: int = 1) -> int:
    # Python ints: np.prod silently overflows int64, and a negative product would pass the
    # size limits and then fail (or OOM) at allocation.
    return functools.reduce(lambda x, y: int(x) * int(y), values, base)


def _resolve(spec: Sequence[Any], params: dict[str, Any], dim: int) -> tuple[Any, ...]:
    """Replace parameter names by their values, then truncate or pad with 1 to ``dim`` entries."""
    values = tuple(params.get(v, v) for v in spec[:dim])
    return values + (1,) * (dim - len(values))


class FuzzedTensor:
    """A tensor whose shape, strides and memory layout come from fuzzed parameters.

    ``size`` and ``steps`` entries are ints or parameter names. With ``steps`` a larger tensor
    is allocated and sliced (``t[::step]``) to get strided memory. With probability
    ``1 - probability_contiguous`` the dimensions are stored in a random order. Candidates
    whose element count or pre-slicing allocation break ``min_elements``/``max_elements``/
    ``max_allocation_bytes`` are resampled. ``dim_parameter`` names a parameter that truncates
    (or pads with 1) ``size`` and ``steps``. ``tensor_constructor(size=..., dtype=..., **params)``
    replaces the default ``torch.rand``/``torch.randint(1, 127)``. ``roll_parameter`` is
    accepted for signature compatibility and, as in torch, unused.

    Example::

        FuzzedTensor("x", size=("k0", 16), steps=(1, "s"), min_elements=128,
                     probability_contiguous=0.6)
    """

    def __init__(
        self,
        name: str,
        size: tuple[str | int, ...],
        steps: tuple[str | int, ...] | None = None,
        probability_contiguous: float = 0.5,
        min_elements: int | None = None,
        max_elements: int | None = None,
        max_allocation_bytes: int | None = None,
        dim_parameter: str | None = None,
        roll_parameter: str | None = None,
        dtype: _torch_t.dtype | None = None,
        cuda: bool = False,
        tensor_constructor: Callable[..., Any] | None = None,
    ) -> None:
        _require()
        if not 0 <= probability_contiguous <= 1:
            raise FuzzerSpecError(
                f"{name}: probability_contiguous must be in [0, 1], got {probability_contiguous}")
        self._name = name
        self._size = tuple(size)
        self._steps = tuple(steps or ())
        self._probability_contiguous = probability_contiguous
        self._min_elements = min_elements
        self._max_elements = max_elements
        self._max_allocation_bytes = max_allocation_bytes
        self._dim_parameter = dim_parameter
        self._dtype = torch.float32 if dtype is None else dtype
        self._cuda = cuda
        self._tensor_constructor = tensor_constructor
        # Checked on every candidate, so computed once (this also rejects unsupported dtypes
        # up front instead of on the first draw).
        self._itemsize = _dtype_size(self._dtype)

    @property
    def name(self) -> str:
        return self._name

    @staticmethod
    def default_tensor_constructor(size: tuple[int, ...], dtype: _torch_t.dtype,
                                   **kwargs: Any) -> _torch_t.Tensor:
        if dtype.is_floating_point or dtype.is_complex:
            return torch.rand(size=size, dtype=dtype, device="cpu")
        return torch.randint(1, 127, size=size, dtype=dtype, device="cpu")

    def _get_size_and_steps(
        self, params: dict[str, Any]
    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        dim = len(self._size) if self._dim_parameter is None else params[self._dim_parameter]
        size = _resolve(self._size, params, dim)
        steps = _resolve(self._steps, params, dim)
        allocation_size = tuple(n * step for n, step in zip(size, steps))
        return size, steps, allocation_size

    def _parameter_names(self) -> list[str]:
        """The parameters this tensor reads (checked against the Fuzzer's up front)."""
        names = [v for v in self._size + self._steps if isinstance(v, str)]
        return names + ([self._dim_parameter] if self._dim_parameter is not None else [])

    def satisfies_constraints(self, params: dict[str, Any]) -> bool:
        """Whether these parameter values give a tensor within the element/byte limits."""
        size, _, allocation_size = self._get_size_and_steps(params)
        numel = _prod(size)
        if numel < 0:
            raise FuzzerSpecError(f"{self._name}: size {size} has a negative number of elements")
        if self._max_elements is not None and numel > self._max_elements:
            return False
        if self._min_elements is not None and numel < self._min_elements:
            return False
        if self._max_allocation_bytes is None:
            return True
        return _prod(allocation_size, base=self._itemsize) <= self._max_allocation_bytes

    def _make_tensor(self, params: dict[str, Any],
                     state: numpy.random.RandomState) -> tuple[Any, dict[str, Any]]:
        """Build the tensor (global torch RNG) and lay it out (numpy ``state``), as torch does."""
        size, steps, allocation_size = self._get_size_and_steps(params)
        constructor = self._tensor_constructor or self.default_tensor_constructor
        raw = constructor(size=allocation_size, dtype=self._dtype, **params)
        if self._cuda:
            raw = raw.cuda()

        dim = len(size)
        order = np.arange(dim)
        # This draw happens on every call, even when the answer is "contiguous".
        if state.rand() > self._probability_contiguous:
            # Store the dimensions in a random non-identity order, then view them back in the
            # original order: same shape and values, permuted strides.
            while dim > 1 and (order == np.arange(dim)).all():
                order = state.permutation(raw.dim())
            raw = raw.permute(tuple(order.tolist())).contiguous()
            raw = raw.permute(tuple(np.argsort(order).tolist()))

        tensor = raw
        if any(step != 1 for step in steps):  # slicing with step 1 everywhere is a no-op view
            tensor = raw[tuple(slice(0, n * step, step) for n, step in zip(size, steps))]

        properties = {
            "numel": int(tensor.numel()),
            "order": order,
            "steps": steps,
            "is_contiguous": tensor.is_contiguous(),
            "dtype": str(self._dtype),
        }
        return tensor, properties


_Nested = Union[Any, Sequence[Any]]


def _flatten(values: Sequence[_Nested], cls: type, what: str) -> tuple[Any, ...]:
    """Unpack one level of nesting (as torch does) and reject anything that is not ``cls``."""
    def bad(v: Any) -> TypeError:
        return TypeError(
            f"Fuzzer {what} must be opbench {cls.__name__} objects or lists of them (one level "
            f"of nesting), got {type(v).__module__}.{type(v).__name__}: {v!r}")

    flat = []
    for v in values:
        if isinstance(v, cls):
            flat.append(v)
        elif isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise bad(v)
        else:
            flat.extend(v)
    for v in flat:
        if not isinstance(v, cls):
            raise bad(v)
    return tuple(flat)


class Fuzzer:
    """Generate benchmark inputs from fuzzed parameters, reproducibly from ``seed``.

    ``take(n)`` yields ``n`` triples ``(tensors, tensor_properties, params)`` (dicts keyed by
    name). Each step draws every parameter (strict ones only once per step), resolves aliases
    and redraws until every ``constraint(params)`` and every tensor limit accepts, giving up
    with ``ValueError`` after 1000 candidates. Constraints receive the params dict as their
    single positional argument, as in torch. Each ``take`` restarts from ``seed``.

    Example::

        fuzzer = Fuzzer(
            parameters=[FuzzedParameter("n", minval=1, maxval=1024, distribution="loguniform")],
            tensors=[FuzzedTensor("x", size=("n",), min_elements=8)],
            constraints=[lambda params: params["n"] % 2 == 0],
            seed=0,
        )
        tensors, properties, params = next(iter(fuzzer.take(1)))
    """

    def __init__(
        self,
        parameters: Sequence[FuzzedParameter | Sequence[FuzzedParameter]],
        tensors: Sequence[FuzzedTensor | Sequence[FuzzedTensor]],
        constraints: Sequence[Callable[[dict[str, Any]], bool]] | None = None,
        seed: int | None = None,
    ) -> None:
        _require()
        if seed is None:
            seed = int(np.random.RandomState().randint(0, 2 ** 32 - 1, dtype=np.int64))
        self._seed = seed
        self._parameters = _flatten(parameters, FuzzedParameter, "parameters")
        self._tensors = _flatten(tensors, FuzzedTensor, "tensors")
        self._constraints = tuple(constraints or ())
        self._check_names()
        # Only dict distributions with alias keys can yield an alias; resolve just those.
        self._alias_names = tuple(
            p.name for p in self._parameters
            if isinstance(p._distribution, dict)
            and any(isinstance(k, ParameterAlias) for k in p._distribution))
        # (name, sampler, strict) per parameter: the per-candidate loop is the hot path.
        self._plan = tuple((p.name, p._sampler, p.strict) for p in self._parameters)
        self._rejections = 0
        self._total_generated = 0

    def _check_names(self) -> None:
        p_names = [p.name for p in self._parameters]
        duplicates = sorted({n for n in p_names if p_names.count(n) > 1})
        if duplicates:
            raise ValueError(f"Duplicate parameter names: {duplicates}")
        overlap = set(p_names).intersection(t.name for t in self._tensors)
        if overlap:
            raise ValueError(f"Duplicate names in parameters and tensors: {overlap}")
        for t in self._tensors:
            missing = [n for n in t._parameter_names() if n not in p_names]
            if missing:
                raise ValueError(
                    f"Tensor {t.name!r} refers to {missing}, which are not parameters of this "
                    f"Fuzzer (parameters: {p_names})")
        for p in self._parameters:
            if not isinstance(p._distribution, dict):
                continue
            for choice in p._distribution:
                if isinstance(choice, ParameterAlias) and choice.alias_to not in p_names:
                    raise ValueError(
                        f"Parameter {p.name!r} aliases {choice.alias_to!r}, which is not a "
                        f"parameter of this Fuzzer (parameters: {p_names})")

    @property
    def rejection_rate(self) -> float:
        """Fraction of all candidates so far (over every ``take``) that were rejected."""
        if not self._total_generated:
            return 0.0
        return self._rejections / self._total_generated

    def take(self, n: int, *, progress: bool = False) -> Iterator[
            tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, Any]]]:
        """Yield ``n`` ``(tensors, tensor_properties, params)`` triples, restarting from seed.

        ``progress=True`` shows a bar with the time left over the sweep on stderr
        (the work done between yields counts; see ``opbench.progress``). Off by
        default, as torch's Fuzzer prints nothing: a bar drawn into the caller's
        own prints garbles them.
        """
        from opbench.progress import Progress

        state = np.random.RandomState(self._seed)
        # torch calls torch.manual_seed() with this draw; a private generator seeded with it
        # holds the same stream without touching the caller's global generator.
        torch_seed = int(state.randint(low=0, high=2 ** 63, dtype=np.int64))
        stream = torch.Generator().manual_seed(torch_seed).get_state()
        with Progress(n, desc="fuzzer", enabled=progress) as bar:
            for _ in range(n):
                params = self._generate(state)
                # Constructors (default, user-supplied, subclass overrides) draw from the
                # global generator, so it carries the fuzzer's stream while they run.
                caller_state = torch.get_rng_state()
                torch.set_rng_state(stream)
                try:
                    tensors, tensor_properties = {}, {}
                    for t in self._tensors:
                        tensors[t.name], tensor_properties[t.name] = t._make_tensor(params, state)
                finally:
                    stream = torch.get_rng_state()
                    torch.set_rng_state(caller_state)
                yield tensors, tensor_properties, params
                bar.update()

    def _generate(self, state: numpy.random.RandomState) -> dict[str, Any]:
        strict_values: dict[str, Any] = {}
        for _ in range(_MAX_CANDIDATES):
            candidate: dict[str, Any] = {}
            # Draw order is parity-critical: every parameter in declaration order, with strict
            # parameters drawing only on the first candidate of the step.
            for name, sample, strict in self._plan:
                if not strict:
                    candidate[name] = sample(state)
                elif name in strict_values:
                    candidate[name] = strict_values[name]
                else:
                    candidate[name] = strict_values[name] = sample(state)
            self._resolve_aliases(candidate)

            self._total_generated += 1
            if (all(f(candidate) for f in self._constraints)
                    and all(t.satisfies_constraints(candidate) for t in self._tensors)):
                return candidate
            self._rejections += 1
        raise ValueError(
            f"Failed to generate a set of valid parameters: all {_MAX_CANDIDATES} candidates "
            "were rejected by the constraints or the tensors' min_elements/max_elements/"
            "max_allocation_bytes limits. Loosen those limits or widen the parameter ranges.")

    def _resolve_aliases(self, params: dict[str, Any]) -> None:
        """Replace every alias (in place) by the value at the end of its chain."""
        for name in self._alias_names:
            value, chain = params[name], [name]
            while isinstance(value, ParameterAlias):
                if value.alias_to in chain:
                    raise ValueError(
                        "ParameterAlias cycle detected: " + " -> ".join([*chain, value.alias_to]))
                chain.append(value.alias_to)
                value = params[value.alias_to]
            params[name] = value
