"""The PyTorch benchmark recipe, steps 1-7, run against `import opbench as benchmark`.

Sizes and run times are cut down so the test takes seconds; the code is the
recipe's own otherwise. (Step 8, callgrind and load_inline, is in
test_recipe_cpp.py and the callgrind tests.)
"""
from __future__ import annotations

import pickle
import sys
import timeit
import types
from itertools import product

import pytest
import torch

import opbench as benchmark


def batched_dot_mul_sum(a, b):
    """Computes batched dot by multiplying and summing"""
    return a.mul(b).sum(-1)


def batched_dot_bmm(a, b):
    """Computes batched dot by reducing to bmm"""
    a = a.reshape(-1, 1, a.shape[-1])
    b = b.reshape(-1, b.shape[-1], 1)
    return torch.bmm(a, b).flatten(-3)


@pytest.fixture(autouse=True)
def as_main(monkeypatch):
    """The recipe's setup does `from __main__ import ...`: provide a __main__ that has them."""
    main = types.ModuleType("__main__")
    main.batched_dot_mul_sum = batched_dot_mul_sum
    main.batched_dot_bmm = batched_dot_bmm
    monkeypatch.setitem(sys.modules, "__main__", main)


def _timer(stmt, x, **kwargs):
    return benchmark.Timer(
        stmt=stmt, setup=f"from __main__ import {stmt.split('(')[0]}", globals={"x": x}, **kwargs
    )


def test_steps_1_to_4_timeit_and_blocked_autorange():
    x = torch.randn(100, 64)
    assert batched_dot_mul_sum(x, x).allclose(batched_dot_bmm(x, x))
    t0 = timeit.Timer(stmt="batched_dot_mul_sum(x, x)",
                      setup="from __main__ import batched_dot_mul_sum", globals={"x": x})
    assert t0.timeit(10) > 0

    t0 = _timer("batched_dot_mul_sum(x, x)", x)
    t1 = _timer("batched_dot_bmm(x, x)", x, num_threads=torch.get_num_threads(),
                label="Multithreaded batch dot", sub_label="Implemented using bmm")
    m0, m1 = t0.timeit(100), t1.timeit(100)
    assert "setup: from __main__ import batched_dot_mul_sum" in repr(m0)
    assert "Multithreaded batch dot: Implemented using bmm" in repr(m1)
    assert "1 measurement, 100 runs , " in repr(m0)

    m0 = t0.blocked_autorange(min_run_time=0.05)
    assert m0.mean > 0 and m0.median > 0
    assert f"{m0.median * 1e6:6.2f} us"


def test_step_5_compare_table():
    results = []
    sizes = [1, 64]
    for b, n in product(sizes, sizes):
        x = torch.ones((b, n))
        for num_threads in [1, 2]:
            for stmt, description in (("batched_dot_mul_sum(x, x)", "mul/sum"),
                                      ("batched_dot_bmm(x, x)", "bmm")):
                results.append(_timer(
                    stmt, x, num_threads=num_threads, label="Batched dot",
                    sub_label=f"[{b}, {n}]", description=description,
                ).blocked_autorange(min_run_time=0.01))
    compare = benchmark.Compare(results)
    text = str(compare)
    assert text.startswith("[") and "Batched dot" in text
    assert "1 threads: " in text and "2 threads: " in text
    assert "[64, 64]" in text and "mul/sum" in text and "bmm" in text
    compare.trim_significant_figures()
    compare.colorize()
    assert "\033[" in str(compare)


def test_step_6_pickled_ab_results():
    ab_test_results = []
    for env in ("environment A: mul/sum", "environment B: bmm"):
        for b, n in ((1, 1), (16, 100)):
            x = torch.ones((b, n))
            dot_fn = batched_dot_mul_sum if env == "environment A: mul/sum" else batched_dot_bmm
            m = benchmark.Timer(
                stmt="batched_dot(x, x)", globals={"x": x, "batched_dot": dot_fn},
                num_threads=1, label="Batched dot", description=f"[{b}, {n}]", env=env,
            ).blocked_autorange(min_run_time=0.01)
            ab_test_results.append(pickle.dumps(m))
    ab_results = [pickle.loads(i) for i in ab_test_results]
    compare = benchmark.Compare(ab_results)
    compare.trim_significant_figures()
    compare.colorize()
    text = str(compare)
    assert "(environment A: mul/sum)" in text and "(environment B: bmm)" in text
    round_tripped = pickle.loads(pickle.dumps(ab_results))
    assert str(benchmark.Compare(ab_results)) == str(benchmark.Compare(round_tripped))


def test_step_7_fuzzed_inputs():
    from opbench import FuzzedParameter, FuzzedTensor, Fuzzer
    from opbench.fuzz.op_fuzzers import binary

    example_fuzzer = Fuzzer(
        parameters=[
            FuzzedParameter("k0", minval=1, maxval=10000, distribution="loguniform"),
            FuzzedParameter("k1", minval=1, maxval=10000, distribution="loguniform"),
        ],
        tensors=[FuzzedTensor("x", size=("k0", "k1"), min_elements=128, max_elements=100000,
                              probability_contiguous=0.6)],
        seed=0,
    )
    results = []
    for tensors, tensor_params, params in example_fuzzer.take(3):
        sub_label = (f"{params['k0']:<6} x {params['k1']:<4} "
                     f"{'' if tensor_params['x']['is_contiguous'] else '(discontiguous)'}")
        results.append(benchmark.Timer(
            stmt="batched_dot_mul_sum(x, x)", setup="from __main__ import batched_dot_mul_sum",
            globals=tensors, label="Batched dot", sub_label=sub_label, description="mul/sum",
        ).blocked_autorange(min_run_time=0.01))
    compare = benchmark.Compare(results)
    compare.trim_significant_figures()
    assert "Batched dot" in str(compare)

    # torch 2.13's own BinaryOpFuzzer raises here (torch_bugs.py); opbench's works.
    takes = list(binary.BinaryOpFuzzer(seed=0).take(2))
    assert len(takes) == 2 and {"x", "y"} <= set(takes[0][0])
