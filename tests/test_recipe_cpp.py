"""The recipe's section 8 (examples/recipe_section8.py): two load_inline
implementations compared with opbench, by time and by instruction counts. One
opbench.engines.cpp.load_inline build shared by every test in this file, through the
run's shared C++ cache (torch's extension header is precompiled once per run);
two callgrind collections (~20 s each under valgrind)."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="load_inline needs torch")
pytestmark = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("c++", "g++")), reason="no C++ compiler on PATH"
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "recipe_section8.py"


@pytest.fixture(scope="module")
def recipe():
    spec = importlib.util.spec_from_file_location("recipe_section8", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def extension(recipe, tmp_path_factory):
    from cpp_cache import torch_cache_dir

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPBENCH_CACHE_DIR", str(torch_cache_dir(tmp_path_factory)))
        return recipe.build_module()


def test_both_implementations_agree(extension) -> None:
    x = torch.randn(100, 64, generator=torch.Generator().manual_seed(0))
    by_value = extension.batched_dot_mul_sum_v0(x, x)
    assert torch.equal(by_value, extension.batched_dot_mul_sum_v1(x, x))
    assert torch.allclose(by_value, (x * x).sum(-1))


def test_blocked_autorange_compares_them(recipe, extension) -> None:
    x = torch.randn(2, 2)
    results = recipe.compare(extension, x, min_run_time=0.02)
    assert set(results) == {"batched_dot_mul_sum_v0", "batched_dot_mul_sum_v1"}
    for name, m in results.items():
        assert m.median > 0
        assert m.stmt == f"module.{name}(x, x)"
        assert f"batched dot (load_inline): {name}" in str(m)  # the printed title


def test_header_library_times_inside_the_extension(extension) -> None:
    # opbench's headers were found through include_dir() and their loop runs.
    x = torch.randn(2, 2)
    assert extension.by_reference_ns_per_call(x, x, 1000) > 0


@pytest.fixture(scope="module")
def instructions(recipe, extension):
    """The recipe's two collections (v0, v1) and their delta, collected once."""
    from opbench.callgrind.collect import callgrind_unavailable_reason

    reason = callgrind_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return recipe.instruction_delta(extension)


def test_by_reference_executes_fewer_instructions(instructions) -> None:
    # Wall time (above) cannot tell the two apart; the binding code's instruction
    # counts can, exactly: by reference skips the argument copies (-3,900 for
    # 100 calls here). The whole-statement total is not asserted: each collection
    # is a fresh process, whose allocator and interpreter move it by as much
    # (+4,360 in one CI run of ten turned the total positive).
    stats_v0, stats_v1, delta = instructions
    binding = delta.filter(lambda fn: "pybind11" in fn or "wrap_pybind_function" in fn)
    assert binding.sum() < 0, binding
    assert delta.sum() == stats_v1.counts(denoise=True) - stats_v0.counts(denoise=True)
    # The recipe's replacements merged the two versions' symbols into one name.
    names = [fn for _, fn in delta]
    assert not any("batched_dot_mul_sum_v0" in fn for fn in names)


def test_callgrind_stats_print_the_import_as_the_recipe_does(recipe, extension, instructions,
                                                             capsys) -> None:
    stats_v0, _, _ = instructions
    assert stats_v0.number_per_run == 100
    recipe.pretty_print(extension, stats_v0)
    text = capsys.readouterr().out
    assert "cpp_lib.batched_dot_mul_sum_v0(x, x)" in text
    assert "  import cpp_lib\n  x = torch.randn(2, 2)" in text
    assert "spec_from_file_location" not in text
