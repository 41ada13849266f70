"""opbench.cpp.load_inline with a real compiler and torch's real headers: torch's
signature, a normal extension module, a rebuild that reuses the precompiled
<torch/extension.h>, and errors at the user's own lines. The precompiled header is
the one the recipe's test (test_recipe_cpp.py) uses: same flags, the run's shared
cache, built once per run."""
from __future__ import annotations

import inspect
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="load_inline needs torch")
pytestmark = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("c++", "g++")), reason="no C++ compiler on PATH"
)

from opbench.cpp import include_dir, load_inline
from opbench.errors import CompileError, PrecompiledHeaderWarning

# The recipe's flags (examples/recipe_section8.py), so the two files share one PCH.
FLAGS = {"extra_cflags": ["-O2"], "extra_include_paths": [include_dir()]}
SOURCE = """
torch::Tensor scaled(const torch::Tensor& x) {{ return x * {factor}; }}
"""


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
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecompiledHeaderWarning)  # the PCH must be used
        first = load_inline("opbench_li_test", SOURCE.format(factor=2), functions=["scaled"],
                            **FLAGS)
        # One function changed: a new build, under torch's versioned name (pybind11
        # keeps one module per name and process), from the same precompiled header.
        second = load_inline("opbench_li_test", SOURCE.format(factor=3),
                             functions={"scaled": "x times three"}, **FLAGS)
    x = torch.ones(3)
    assert torch.equal(first.scaled(x), 2 * x) and torch.equal(second.scaled(x), 3 * x)
    assert first.__name__ == "opbench_li_test" and second.__name__ == "opbench_li_test_v1"
    assert second.scaled.__doc__.strip().endswith("x times three")
    assert len(list((_cache / "pch").glob("*/opbench_pch.h.gch"))) >= 1
    # A normal extension module: another process imports it from its file, as the
    # recipe's callgrind children (and torch's own tools) do.
    child = ("import importlib.util, sys, torch\n"
             "spec = importlib.util.spec_from_file_location(sys.argv[1], sys.argv[2])\n"
             "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
             "print(m.scaled(torch.ones(1)).item())")
    out = subprocess.run([sys.executable, "-c", child, second.__name__, second.__file__],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3.0"


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
