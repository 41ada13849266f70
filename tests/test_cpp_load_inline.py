"""opbench.engines.cpp.load_inline with a real compiler and torch's real headers: torch's
signature, a normal extension module, a rebuild that reuses the precompiled
<torch/extension.h>, and errors at the user's own lines. The extension and the
precompiled header are the recipe's (test_recipe_cpp.py): same source and flags,
the run's shared cache, so each is built once per run."""
from __future__ import annotations

import importlib.util
import inspect
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from opbench.engines.cpp import include_dir, load_inline
from opbench.errors import CompileError, PrecompiledHeaderWarning

torch = pytest.importorskip("torch", reason="load_inline needs torch")
pytestmark = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("c++", "g++")), reason="no C++ compiler on PATH"
)

# The recipe's flags (examples/recipe_section8.py), so the two files share one PCH.
FLAGS = {"extra_cflags": ["-O2"], "extra_include_paths": [include_dir()]}
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "recipe_section8.py"


def _recipe():
    spec = importlib.util.spec_from_file_location("recipe_section8", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory):
    from cpp_cache import torch_cache_dir

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPBENCH_CACHE_DIR", str(torch_cache_dir(tmp_path_factory)))
        yield torch_cache_dir(tmp_path_factory)


def test_signature_is_torchs() -> None:
    from torch.utils.cpp_extension import load_inline as theirs

    ours, torch_params = inspect.signature(load_inline).parameters, inspect.signature(theirs).parameters
    assert list(ours) == list(torch_params)
    differing = [n for n in ours if ours[n].default != torch_params[n].default]
    assert differing == ["use_pch"]  # precompiled headers on by default


def test_extension_module_and_rebuild_through_the_pch(_cache: Path) -> None:
    # The first build is the recipe's extension (test_recipe_cpp.py builds the same one,
    # so the run compiles it once); then one function changes, as in an A/B edit.
    recipe = _recipe()
    first = recipe.build_module()
    head, _, tail = recipe.CPP_SOURCE.rpartition("a.mul(b).sum(-1)")  # v1's body
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecompiledHeaderWarning)  # the PCH must be used
        second = load_inline(first.__name__, [head + "(a * b).sum(-1) * 2" + tail],
                             functions={name: f"doc of {name}" for name in recipe.FUNCTIONS},
                             **FLAGS)
    x = torch.ones(2, 3)
    assert torch.equal(first.batched_dot_mul_sum_v1(x, x), torch.full((2,), 3.0))
    assert torch.equal(second.batched_dot_mul_sum_v1(x, x), torch.full((2,), 6.0))
    # A changed build under an already loaded name gets torch's versioned name
    # (pybind11 keeps one module per name and process).
    assert second.__name__ == f"{first.__name__}_v1"
    assert "doc of batched_dot_mul_sum_v0" in second.batched_dot_mul_sum_v0.__doc__
    assert len(list((_cache / "pch").glob("*/opbench_pch.h.gch"))) >= 1
    # A normal extension module: another process imports it from its file, as the
    # recipe's callgrind children (and torch's own tools) do.
    child = ("import importlib.util, sys, torch\n"
             "spec = importlib.util.spec_from_file_location(sys.argv[1], sys.argv[2])\n"
             "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
             "print(m.batched_dot_mul_sum_v1(torch.ones(1, 3), torch.ones(1, 3)).item())")
    out = subprocess.run([sys.executable, "-c", child, second.__name__, second.__file__],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "6.0"


def test_compile_errors_name_the_users_source_and_line() -> None:
    with pytest.raises(CompileError) as info:
        load_inline("opbench_li_broken", ["int fine() { return 1; }",
                                          "int ok() { return 2; }\nint bad() { return nope; }"],
                    functions=["fine"], **FLAGS)
    message = str(info.value)
    assert message.startswith("C++ extension 'opbench_li_broken' failed to compile: "
                              "cpp_sources[1]:2:")
    assert "nope" in message


def test_bad_name_is_refused_before_building() -> None:
    with pytest.raises(ValueError, match="valid Python identifier"):
        load_inline("not a name", "", functions=[])
