"""The recipe's section 8 (examples/recipe_section8.py): two load_inline
implementations compared with opbench. One load_inline build (~30-60 s, cached
by torch across runs) shared by every test in this file."""
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
def extension(recipe):
    return recipe.build_module()


def test_both_implementations_agree(extension) -> None:
    x = torch.randn(100, 64, generator=torch.Generator().manual_seed(0))
    by_value = extension.batched_dot_by_value(x, x)
    assert torch.equal(by_value, extension.batched_dot_by_reference(x, x))
    assert torch.allclose(by_value, (x * x).sum(-1))


def test_blocked_autorange_compares_them(recipe, extension) -> None:
    x = torch.randn(2, 2)
    results = recipe.compare(extension, x, min_run_time=0.02)
    assert set(results) == {"batched_dot_by_value", "batched_dot_by_reference"}
    for name, m in results.items():
        assert m.median > 0
        assert m.stmt == f"module.{name}(x, x)"
        assert f"batched dot (load_inline): {name}" in str(m)  # the printed title


def test_header_library_times_inside_the_extension(extension) -> None:
    # opbench's headers were found through include_dir() and their loop runs.
    x = torch.randn(2, 2)
    assert extension.by_reference_ns_per_call(x, x, 1000) > 0
