"""Inputs generated per second: opbench.fuzz.fuzzer vs torch.utils.benchmark's fuzzer, same seeds.

Both implementations produce identical inputs (tests/test_fuzzer.py, tests/test_op_fuzzers.py),
so each row times the same work: constructing the fuzzer and consuming ``take(n)``.

- ``full``: real tensors. For the op fuzzers this is dominated by ``torch.rand`` on up to 2 GB
  allocations, which both sides pay alike.
- ``draws``: the tensor constructors of *both* implementations are swapped for shape-only
  stand-ins (meta-device dense tensors, empty sparse tensors), isolating what the fuzzer itself
  costs: parameter draws, rejection sampling, layout (permutation/steps) and properties.

torch 2.13.0's op fuzzers raise on construction (inverted normalisation check); this script
corrects that one check on torch's side so that they run.

Usage: python benchmarks/fuzzer.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import time
import warnings

import torch
import torch.utils.benchmark as tb
import torch.utils.benchmark.utils.fuzzer as torch_fuzzer_module
import torch.utils.benchmark.utils.sparse_fuzzer as torch_sparse_module

import opbench.fuzz.fuzzer as ob
import opbench.fuzz.sparse_fuzzer as ob_sparse

OP_FUZZERS = [("binary", "BinaryOpFuzzer"), ("unary", "UnaryOpFuzzer"),
              ("spectral", "SpectralOpFuzzer"), ("sparse_binary", "BinaryOpSparseFuzzer"),
              ("sparse_unary", "UnaryOpSparseFuzzer")]


def _fixed_torch_check(self, distribution):
    """torch's FuzzedParameter._check_distribution with the normalisation test corrected."""
    if isinstance(distribution, dict):
        assert abs(sum(distribution.values()) - 1) <= 1e-5, "Distribution is not normalized"
    else:
        assert distribution in ("loguniform", "uniform"), f"Unknown distribution: {distribution}"
    return distribution


torch_fuzzer_module.FuzzedParameter._check_distribution = _fixed_torch_check


def _meta_tensor(size, dtype, **params):
    return torch.empty(size, dtype=dtype, device="meta")


def _empty_sparse(size, dtype, sparse_dim, nnz, is_coalesced):
    indices = torch.zeros(sparse_dim, 0, dtype=torch.long)
    tensor = torch.sparse_coo_tensor(indices, torch.zeros([0, *size[sparse_dim:]], dtype=dtype),
                                     size)
    return tensor.coalesce() if is_coalesced else tensor


@contextlib.contextmanager
def _shape_only():
    """Swap in the stand-in constructors on both implementations alike."""
    patches = [(cls, "default_tensor_constructor", _meta_tensor)
               for cls in (ob.FuzzedTensor, torch_fuzzer_module.FuzzedTensor)]
    patches += [(cls, "sparse_tensor_constructor", _empty_sparse)
                for cls in (ob_sparse.FuzzedSparseTensor, torch_sparse_module.FuzzedSparseTensor)]
    saved = [(cls, name, cls.__dict__[name]) for cls, name, _ in patches]
    try:
        for cls, name, fn in patches:
            setattr(cls, name, staticmethod(fn))
        yield
    finally:
        for cls, name, original in saved:
            setattr(cls, name, original)


def _recipe(m, seed):
    """The recipe's example: k0 x k1 loguniform in [1, 10000], 128 to 10M elements."""
    return m.Fuzzer(
        parameters=[m.FuzzedParameter("k0", minval=1, maxval=10000, distribution="loguniform"),
                    m.FuzzedParameter("k1", minval=1, maxval=10000, distribution="loguniform")],
        tensors=[m.FuzzedTensor("x", size=("k0", "k1"), min_elements=128, max_elements=10000000,
                                probability_contiguous=0.6)],
        seed=seed,
    )


def _small(m, seed):
    """Small tensors with aliases and steps: where the fuzzer's own overhead shows."""
    P, A = m.FuzzedParameter, m.ParameterAlias
    return m.Fuzzer(
        parameters=[
            P("dim", distribution={1: 0.3, 2: 0.4, 3: 0.3}, strict=True),
            [P(f"k{i}", minval=1, maxval=64, distribution="loguniform") for i in range(3)],
            [P(f"y_k{i}", distribution={A(f"k{i}"): 0.8, 1: 0.2}) for i in range(3)],
            [P(f"s{i}", distribution={1: 0.8, 2: 0.1, 4: 0.1}) for i in range(3)],
        ],
        tensors=[m.FuzzedTensor("x", size=("k0", "k1", "k2"), steps=("s0", "s1", "s2"),
                                dim_parameter="dim", min_elements=16, max_elements=4096),
                 m.FuzzedTensor("y", size=("y_k0", "y_k1", "y_k2"), dim_parameter="dim")],
        seed=seed,
    )


def _op_fuzzer(module, cls):
    def build(m, seed):
        package = "opbench" if m is ob else "torch.utils.benchmark"
        return getattr(importlib.import_module(f"{package}.op_fuzzers.{module}"), cls)(seed=seed)
    return build


def _compare(build, n, budget_s):
    """Best inputs/s of each side over alternating rounds (at least two) within budget_s.

    Alternating which side goes first cancels out drift on a shared machine; the best round is
    the least disturbed one. Also checks that both sides drew the same params.
    """
    best = {ob: float("inf"), tb: float("inf")}
    drawn = {}
    start = time.perf_counter()
    for round_ in range(1000):
        for m in (tb, ob) if round_ % 2 == 0 else (ob, tb):
            began = time.perf_counter()
            drawn[m] = [params for _, _, params in build(m, 0).take(n)]
            best[m] = min(best[m], time.perf_counter() - began)
        # Two rounds at least, so that each side has once gone first.
        if round_ >= 1 and time.perf_counter() - start > budget_s:
            break
    if drawn[ob] != drawn[tb]:
        raise SystemExit("opbench and torch drew different inputs")
    return n / best[ob], n / best[tb]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds: small n, short")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Sparse invariant checks")
    torch.set_num_threads(1)  # both sides alike; keeps the shared machine usable

    quick = args.quick
    budget = 0.15 if quick else 3.0
    rows = [("recipe example", _recipe, "full", 3 if quick else 20),
            ("small tensors", _small, "full", 30 if quick else 300)]
    rows += [(cls, _op_fuzzer(module, cls), "draws", 20 if quick else 200)
             for module, cls in OP_FUZZERS]
    # Few steps: a single step can allocate 2 GB, and several rounds matter more for the ratio.
    rows += [(cls, _op_fuzzer(module, cls), "full", 1 if quick else 3)
             for module, cls in OP_FUZZERS]

    _compare(_small, 5, 0)  # warm-up: first-call costs (lazy imports, allocators) for both
    print(f"{'fuzzer':<22}{'mode':<7}{'n':>5}{'opbench/s':>13}{'torch/s':>13}{'speedup':>9}")
    for name, build, mode, n in rows:
        with _shape_only() if mode == "draws" else contextlib.nullcontext():
            ours, theirs = _compare(build, n, budget)
        print(f"{name:<22}{mode:<7}{n:>5}{ours:>13.1f}{theirs:>13.1f}{ours / theirs:>8.2f}x",
              flush=True)
    print("full op-fuzzer rows spend their time in torch.rand on large tensors, the same call on "
          "both sides: expect ~1x, within noise (few rounds under --quick).")


if __name__ == "__main__":
    main()
