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
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Callable, Union

from opbench.errors import FuzzerSpecError
from opbench.fuzz import _deps
from opbench.fuzz.fuzzed_tensor import FuzzedTensor

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy

__all__ = ["FuzzedParameter", "FuzzedTensor", "Fuzzer", "ParameterAlias"]

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
        _deps.require()
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
            cdf = _deps.np.asarray(tuple(self._distribution.values()), dtype=_deps.np.float64).cumsum()
            cdf /= cdf[-1]
            edges = cdf.tolist()
            return lambda state: choices[bisect.bisect_right(edges, state.random_sample())]
        if self._distribution == "uniform":
            if self._is_integer_range():
                return lambda state: int(state.randint(low=minval, high=maxval + 1))
            return lambda state: state.uniform(low=minval, high=maxval)
        # loguniform: torch recomputes both logarithms on every draw.
        low, high = float(_deps.np.log2(minval)), float(_deps.np.log2(maxval))

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
        _deps.require()
        if seed is None:
            seed = int(_deps.np.random.RandomState().randint(0, 2 ** 32 - 1, dtype=_deps.np.int64))
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

        state = _deps.np.random.RandomState(self._seed)
        # torch calls torch.manual_seed() with this draw; a private generator seeded with it
        # holds the same stream without touching the caller's global generator.
        torch_seed = int(state.randint(low=0, high=2 ** 63, dtype=_deps.np.int64))
        stream = _deps.torch.Generator().manual_seed(torch_seed).get_state()
        with Progress(n, desc="fuzzer", enabled=progress) as bar:
            for _ in range(n):
                params = self._generate(state)
                # Constructors (default, user-supplied, subclass overrides) draw from the
                # global generator, so it carries the fuzzer's stream while they run.
                caller_state = _deps.torch.get_rng_state()
                _deps.torch.set_rng_state(stream)
                try:
                    tensors, tensor_properties = {}, {}
                    for t in self._tensors:
                        tensors[t.name], tensor_properties[t.name] = t._make_tensor(params, state)
                finally:
                    stream = _deps.torch.get_rng_state()
                    _deps.torch.set_rng_state(caller_state)
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
