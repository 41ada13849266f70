"""opbench.fuzz.fuzzer against torch.utils.benchmark's fuzzer: same seed, same draws.

torch 2.13.0 rejects every normalised dict distribution (its check is inverted); where the
installed torch has that bug (torch_bugs.py), the `torch_fuzzer` fixture corrects that one check,
in the test only, to obtain torch's reference draws. `assert_same_takes` is also used by
test_op_fuzzers.py.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.utils.benchmark as tb

import opbench.fuzz.fuzzer as ob
import torch_bugs
from conftest import assert_same_takes, assert_same_value


def _rich_fuzzer(m, seed):
    """Every feature at once, with small tensors: aliases (chained, strict), int/float/clamped
    draws, steps, dim_parameter, constraints, custom constructor, int and complex dtypes."""
    P, A, T = m.FuzzedParameter, m.ParameterAlias, m.FuzzedTensor
    return m.Fuzzer(
        parameters=[
            P("dim", distribution={1: 0.2, 2: 0.3, 3: 0.5}, strict=True),
            [P(f"k_any_{i}", minval=1, maxval=64, distribution="loguniform") for i in range(3)],
            [P(f"k{i}", distribution={A(f"k_any_{i}"): 0.6, 8: 0.2, A(f"k{max(i - 1, 0)}"): 0.2})
             for i in range(1, 3)],
            P("k0", distribution={A("k_any_0"): 0.9, 16: 0.1}, strict=True),
            P("y_k0", distribution={A("k0"): 0.5, 1: 0.5}, strict=True),
            P("step", distribution={1: 0.6, 2: 0.2, 3: 0.2}),
            P("scale", minval=0.5, maxval=2.0, distribution="uniform"),
            P("count", minval=-3, maxval=3, distribution="uniform"),
            P("mixed", minval=1, maxval=4.5, distribution="uniform"),
            P("clamped", minval=2.5, maxval=100, distribution="loguniform"),
        ],
        tensors=[
            T("x", size=("k0", "k1", "k2"), steps=("step", 1, "step"), dim_parameter="dim",
              probability_contiguous=0.4, min_elements=4, max_elements=4096,
              max_allocation_bytes=48 * 1024, dtype=torch.float32),
            [T("y", size=("y_k0", "k1"), dtype=torch.int16, probability_contiguous=0.3),
             # torch counts a complex64 element as 4 bytes: the limit below bites on that.
             T("z", size=("k2", 3), dtype=torch.complex64, max_allocation_bytes=480,
               tensor_constructor=_scaled_randn)],
        ],
        constraints=[lambda params: params["count"] != 0],
        seed=seed,
    )


def _scaled_randn(size, dtype, **params):
    return torch.randn(size, dtype=dtype) * params["scale"]


def test_rich_fuzzer_matches_torch_for_many_seeds(torch_fuzzer):
    rejected, z_rows = 0.0, set()
    for seed in range(40):
        ours, theirs = _rich_fuzzer(ob, seed), _rich_fuzzer(torch_fuzzer, seed)
        assert_same_takes(ours.take(8), theirs.take(8), 8)
        assert ours.rejection_rate == theirs.rejection_rate
        rejected += ours.rejection_rate
        z_rows.update(params["k2"] for _, _, params in ours.take(8))
    assert rejected > 0
    # Rows 21..40 of z fit the limit only at torch's 4 bytes per complex64 element.
    assert z_rows & set(range(21, 41)) and max(z_rows) <= 40


def test_recipe_example_fuzzer_matches_torch():
    # From the "Generating inputs with Fuzzed Parameters" recipe (no dict distribution, so
    # unpatched torch runs it).
    def example_fuzzer(m):
        return m.Fuzzer(
            parameters=[
                m.FuzzedParameter("k0", minval=1, maxval=10000, distribution="loguniform"),
                m.FuzzedParameter("k1", minval=1, maxval=10000, distribution="loguniform"),
            ],
            tensors=[m.FuzzedTensor("x", size=("k0", "k1"), min_elements=128,
                                    max_elements=10000000, probability_contiguous=0.6)],
            seed=0,
        )

    def labels(fuzzer):
        return [f"{p['k0']:<6} x {p['k1']:<4} {'' if tp['x']['is_contiguous'] else '(discontiguous)'}"
                for _, tp, p in fuzzer.take(10)]

    assert_same_takes(example_fuzzer(ob).take(10), example_fuzzer(tb).take(10), 10)
    assert labels(example_fuzzer(ob)) == labels(example_fuzzer(tb))


@pytest.mark.parametrize("kwargs", [
    dict(minval=16, maxval=16 * 1024 ** 2, distribution="loguniform"),
    dict(minval=2.5, maxval=300.0, distribution="loguniform"),
    dict(minval=0, maxval=2 ** 32 - 1, distribution="uniform"),
    dict(minval=-1.5, maxval=7, distribution="uniform"),
    dict(distribution={"a": 0.5, 3: 0.25, None: 0.0, 2.5: 0.25}),
])
def test_sample_matches_torch_draw_for_draw(torch_fuzzer, kwargs):
    ours = ob.FuzzedParameter("p", **kwargs)
    theirs = torch_fuzzer.FuzzedParameter("p", **kwargs)
    a, b = np.random.RandomState(7), np.random.RandomState(7)
    for _ in range(2000):
        assert_same_value(ours.sample(a), theirs.sample(b), kwargs)
    assert a.randint(2 ** 31) == b.randint(2 ** 31)  # and left both states in step


def test_sample_types():
    state = np.random.RandomState(0)
    assert type(ob.FuzzedParameter("p", 1, 9, "uniform").sample(state)) is int
    assert type(ob.FuzzedParameter("p", 1, 9.0, "uniform").sample(state)) is float
    assert type(ob.FuzzedParameter("p", 1, 9.0, "loguniform").sample(state)) is int
    choice = ob.ParameterAlias("q")
    assert ob.FuzzedParameter("p", distribution={choice: 1.0}).sample(state) is choice


def test_normalized_distributions_are_accepted():
    # torch 2.13 rejects them (an inverted check), which makes its op fuzzers unusable.
    assert ob.FuzzedParameter("p", distribution={1: 0.5, 2: 0.5}).name == "p"
    if not torch_bugs.fuzzer_rejects_normalized_distributions():
        assert tb.FuzzedParameter("p", distribution={1: 0.5, 2: 0.5}).name == "p"


@pytest.mark.parametrize("kwargs, match", [
    (dict(distribution="gaussian"), "Unknown distribution"),
    (dict(distribution=None), "Unknown distribution"),
    (dict(distribution={1: 0.7, 2: 0.7}), "not normalized"),
    (dict(distribution={}), "not normalized"),
    (dict(distribution={1: 1.5, 2: -0.5}), "cannot be negative"),
    (dict(minval=1, distribution={1: 1.0}), "'minval' must be None"),
    (dict(maxval=1, distribution={1: 1.0}), "'maxval' must be None"),
    (dict(minval=1, distribution="uniform"), "needs both minval and maxval"),
    (dict(minval=0, maxval=8, distribution="loguniform"), "minval > 0"),
    (dict(minval=9, maxval=8, distribution="uniform"), "greater than maxval"),
])
def test_parameter_validation(kwargs, match):
    # ValueError for new code, AssertionError for code written against torch.
    for error in (ValueError, AssertionError):
        with pytest.raises(error, match=match):
            ob.FuzzedParameter("p", **kwargs)


def _fuzzer(parameters, tensors=(), **kwargs):
    return ob.Fuzzer(parameters=parameters, tensors=list(tensors), seed=0, **kwargs)


def test_fuzzer_validation():
    n = ob.FuzzedParameter("n", 1, 8, "uniform")
    with pytest.raises(ValueError, match="Duplicate names in parameters and tensors"):
        _fuzzer([n], [ob.FuzzedTensor("n", size=(2,))])
    with pytest.raises(ValueError, match="Duplicate parameter names"):
        _fuzzer([n, ob.FuzzedParameter("n", 1, 4, "uniform")])
    with pytest.raises(ValueError, match="aliases 'missing'"):
        _fuzzer([n, ob.FuzzedParameter("m", distribution={ob.ParameterAlias("missing"): 1.0})])
    with pytest.raises(TypeError, match="FuzzedParameter objects or lists of them"):
        _fuzzer([n, [[n]]])
    with pytest.raises(TypeError, match=r"opbench FuzzedParameter.*torch\.utils\.benchmark"):
        _fuzzer([tb.FuzzedParameter("m", 1, 4, "uniform")])
    with pytest.raises(ValueError, match=r"Tensor 'x' refers to \['k', 'd'\]"):
        _fuzzer([n], [ob.FuzzedTensor("x", size=("n", "k"), dim_parameter="d")])
    with pytest.raises(ValueError, match="probability_contiguous"):
        ob.FuzzedTensor("x", size=(2,), probability_contiguous=1.5)


def test_alias_cycle_is_detected_when_drawn():
    A = ob.ParameterAlias
    fuzzer = _fuzzer([ob.FuzzedParameter("a", distribution={A("b"): 1.0}),
                      ob.FuzzedParameter("b", distribution={A("c"): 1.0}),
                      ob.FuzzedParameter("c", distribution={A("a"): 1.0})])
    with pytest.raises(ValueError, match="ParameterAlias cycle detected: a -> b -> c -> a"):
        next(iter(fuzzer.take(1)))


def test_alias_chain_and_nested_lists():
    A = ob.ParameterAlias
    fuzzer = _fuzzer([[ob.FuzzedParameter("a", distribution={A("b"): 1.0}),
                       ob.FuzzedParameter("b", distribution={A("c"): 1.0})],
                      ob.FuzzedParameter("c", 3, 3, "uniform")],
                     [[ob.FuzzedTensor("x", size=("a", "b"))]])
    tensors, properties, params = next(iter(fuzzer.take(1)))
    assert params == {"a": 3, "b": 3, "c": 3}
    assert tensors["x"].shape == (3, 3) and properties["x"]["numel"] == 9


def test_rejecting_every_candidate_raises_clear_error():
    fuzzer = _fuzzer([ob.FuzzedParameter("n", 1, 8, "uniform")],
                     [ob.FuzzedTensor("x", size=("n",), min_elements=100)])
    with pytest.raises(ValueError, match=r"Failed to generate a set of valid parameters.*Loosen"):
        next(iter(fuzzer.take(1)))
    assert fuzzer.rejection_rate == 1.0


def test_constraints_receive_params_and_rejection_rate_counts():
    seen = []
    fuzzer = _fuzzer([ob.FuzzedParameter("n", 1, 8, "uniform")],
                     constraints=[lambda params: seen.append(dict(params)) or params["n"] > 4])
    draws = [params["n"] for _, _, params in fuzzer.take(20)]
    assert all(n > 4 for n in draws) and len(seen) > 20
    assert fuzzer.rejection_rate == pytest.approx((len(seen) - 20) / len(seen))


def test_take_restarts_from_seed_and_leaves_global_rng_alone():
    fuzzer = _rich_fuzzer(ob, seed=None)  # a random seed, fixed at construction
    torch.manual_seed(1234)
    expected = torch.rand(500)  # the caller's own stream
    torch.manual_seed(1234)
    first = [tensors["x"] for tensors, _, _ in fuzzer.take(5)]
    # Drawing between steps, the caller sees its own stream and does not perturb the inputs.
    second, drawn = [], []
    for tensors, _, _ in fuzzer.take(5):
        second.append(tensors["x"])
        drawn.append(torch.rand(100))
    assert torch.equal(torch.cat(drawn), expected)
    assert all(torch.equal(a, b) for a, b in zip(first, second))


def test_global_rng_restored_when_constructor_fails():
    def failing(size, dtype, **params):
        torch.rand(10)
        raise RuntimeError("boom")

    fuzzer = _fuzzer([ob.FuzzedParameter("n", 1, 8, "uniform")],
                     [ob.FuzzedTensor("x", size=("n",), tensor_constructor=failing)])
    before = torch.get_rng_state()
    with pytest.raises(RuntimeError, match="boom"):
        next(iter(fuzzer.take(1)))
    assert torch.equal(torch.get_rng_state(), before)


def test_module_imports_without_torch_and_use_says_install_torch():
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # makes `import torch` raise ImportError
        import opbench.fuzz.fuzzer, opbench.fuzz.sparse_fuzzer
        for use in (lambda: opbench.fuzz.fuzzer.FuzzedParameter("n", 1, 2, "uniform"),
                    lambda: opbench.fuzz.fuzzer.Fuzzer([], []),
                    lambda: __import__("opbench.fuzz.op_fuzzers.binary")):
            try:
                use()
            except ImportError as e:
                assert "pip install torch" in str(e), e
            else:
                raise SystemExit("no ImportError")
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_importing_fuzzer_module_does_not_import_torch():
    code = "import sys, opbench.fuzz.fuzzer; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.strip() == "False", result.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="cuda=True needs a CUDA device")
def test_cuda_tensors_match_torch(torch_fuzzer):
    def build(m):
        return m.Fuzzer(
            parameters=[m.FuzzedParameter("n", minval=1, maxval=512, distribution="loguniform"),
                        m.FuzzedParameter("s", distribution={1: 0.5, 2: 0.5})],
            tensors=[m.FuzzedTensor("x", size=("n", 3), steps=("s", 1), cuda=True)],
            seed=3)

    assert_same_takes(build(ob).take(10), build(torch_fuzzer).take(10), 10)
    cuda_state = torch.cuda.get_rng_state()
    list(build(ob).take(3))
    assert torch.equal(torch.cuda.get_rng_state(), cuda_state)


def test_take_shows_progress_when_asked(capsys):
    fuzzer = ob.Fuzzer([ob.FuzzedParameter("n", minval=1, maxval=8, distribution="uniform")],
                       [ob.FuzzedTensor("x", size=("n",))], seed=1)
    assert len(list(fuzzer.take(3, progress=True))) == 3
    err = capsys.readouterr().err
    assert "fuzzer" in err and "3/3" in err
    list(fuzzer.take(3, progress=False))
    assert capsys.readouterr().err == ""


def test_take_is_silent_by_default_even_when_progress_is_forced_on(capsys, monkeypatch):
    # torch's Fuzzer prints nothing; a bar drawn into the user's own prints
    # (`... 20% 0:00 elapsed, ~0:00 leftk0=43: 1.44 us`) garbled them.
    monkeypatch.setenv("OPBENCH_PROGRESS", "1")
    fuzzer = ob.Fuzzer([ob.FuzzedParameter("n", minval=1, maxval=8, distribution="uniform")],
                       [ob.FuzzedTensor("x", size=("n",))], seed=1)
    assert len(list(fuzzer.take(3))) == 3
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""
