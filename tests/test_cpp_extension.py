"""opbench.engines.cpp.extension: load_inline's generated sources and names, as torch's
(building and loading extensions is in tests/test_cpp_load_inline.py)."""
from __future__ import annotations

import pytest

from opbench.engines.cpp import extension


def test_bindings_are_torchs_pybind11_module() -> None:
    assert extension._bindings(None, False) == ""
    text = extension._bindings({"add": "adds"}, error_handling=True)
    assert text.splitlines() == ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {",
                                 'm.def("add", torch::wrap_pybind_function(add), "adds");', "}"]
    assert 'm.def("f", f, "f");' in extension._bindings("f", error_handling=False)
    with pytest.raises(ValueError, match="Expected 'functions' to be a list or dict"):
        extension._bindings(3, False)  # type: ignore[arg-type]


def test_the_main_source_numbers_lines_per_snippet() -> None:
    source, snippets = extension._main_source(["int f();", "int g();"], "B", implicit_header=True)
    assert source.splitlines() == ["#include <torch/extension.h>", '#line 1 "cpp_sources[0]"',
                                   "int f();", '#line 1 "cpp_sources[1]"', "int g();",
                                   '#line 1 "functions"', "B"]
    assert snippets == {"cpp_sources[0]": "int f();", "cpp_sources[1]": "int g();", "functions": "B"}


def test_a_changed_extension_gets_a_new_name_as_in_torch() -> None:
    name = "opbench_test_versioned_ext"
    assert extension._versioned(name, "v0") == name
    assert extension._versioned(name, "v1") == f"{name}_v1"
    assert extension._versioned(name, "v0") == name  # the same inputs: the same module
