"""``load_inline``: torch's ``torch.utils.cpp_extension.load_inline``, rebuilt in seconds.

Same arguments, same generated bindings, same kind of result (an extension
module, importable again from ``module.__file__``, which torch's tools and
``collect_callgrind`` children accept), built differently:

* ``<torch/extension.h>`` is precompiled once per compiler, flags and torch
  version (``opbench.engines.cpp.pch``) and every build after that skips parsing it:
  changing one function rebuilds in seconds rather than half a minute;
* builds are cached by content hash in opbench's cache (``$OPBENCH_CACHE_DIR``),
  so any two variants of an extension, and the same extension in a new
  process, are built once; edited headers from ``extra_include_paths`` rebuild;
* compile errors name ``cpp_sources[i]:LINE`` (the user's own numbering) and
  ``functions:LINE`` for the generated bindings, and raise ``CompileError``
  (a ``RuntimeError``, as torch raises).

CUDA and SYCL sources are handed to torch's own ``load_inline`` unchanged.
``use_pch`` defaults to True (torch: False); ``keep_intermediates`` has no
effect (the cache keeps the source).

Example (compiles: about a minute the first time, seconds afterwards)::

    >>> from opbench.engines.cpp import load_inline
    >>> m = load_inline("add_one", "torch::Tensor add_one(torch::Tensor x) { return x + 1; }",
    ...                 functions=["add_one"])  # doctest: +SKIP
    >>> m.add_one(torch.zeros(2))  # doctest: +SKIP
    tensor([1., 1.])
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any, Union

from opbench._files import atomic_write, atomic_write_text
from opbench.engines.cpp import build

__all__ = ["load_inline"]

Sources = Union[str, list[str], None]


def load_inline(name: str,
                cpp_sources: str | list[str],
                cuda_sources: Sources = None,
                sycl_sources: Sources = None,
                functions: str | list[str] | dict[str, str] | None = None,
                extra_cflags: list[str] | None = None,
                extra_cuda_cflags: list[str] | None = None,
                extra_sycl_cflags: list[str] | None = None,
                extra_ldflags: list[str] | None = None,
                extra_include_paths: list[str] | None = None,
                build_directory: str | None = None,
                verbose: bool = False,
                with_cuda: bool | None = None,
                with_sycl: bool | None = None,
                is_python_module: bool = True,
                with_pytorch_error_handling: bool = True,
                keep_intermediates: bool = True,
                use_pch: bool = True,
                no_implicit_headers: bool = False) -> Any:
    """Builds ``cpp_sources`` into a Python extension module named ``name`` and imports it.

    Arguments as ``torch.utils.cpp_extension.load_inline``. Returns the module,
    or with ``is_python_module=False`` loads the library into torch
    (``torch.ops.load_library``) and returns its path. With
    ``build_directory``, the library and its source are also copied there as
    ``<name>.so`` and ``main.cpp`` (the module is loaded from that copy). As in
    torch, a build that differs from one already loaded under the same name in
    this process is named ``<name>_v1``, ``<name>_v2``, ... (pybind11 keeps one
    module per name).

    Raises:
        ValueError: ``name`` is not a Python identifier, or ``functions`` is
            neither a list nor a dict.
        CompileError: the compiler rejected the code.
    """
    import torch

    if cuda_sources or sycl_sources or with_cuda or with_sycl:
        from torch.utils import cpp_extension

        return cpp_extension.load_inline(
            name, cpp_sources, cuda_sources, sycl_sources, functions, extra_cflags,
            extra_cuda_cflags, extra_sycl_cflags, extra_ldflags, extra_include_paths,
            build_directory, verbose, with_cuda, with_sycl, is_python_module,
            with_pytorch_error_handling, keep_intermediates, use_pch, no_implicit_headers)
    if not name.isidentifier():
        raise ValueError(f"name must be a valid Python identifier (the module's name), got {name!r}")
    sources = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources)
    source, snippets = _main_source(sources, _bindings(functions, with_pytorch_error_handling),
                                    implicit_header=not no_implicit_headers)

    flags = build.torch_flags(python_extension=True)
    # torch's order: -D..., -I (user), -isystem (torch, Python), -fPIC -std, extra flags.
    shared = [*flags.cflags, "-fPIC", *(extra_cflags or [])]
    includes = [f"-I{os.path.abspath(p)}" for p in extra_include_paths or []]
    ldflags = ["-shared", *flags.ldflags, *(extra_ldflags or [])]
    name = _versioned(name, "\0".join([source, *includes, *shared, *ldflags]))
    path = build.build_library(
        source, cflags=[f"-DTORCH_EXTENSION_NAME={name}", *includes, *shared], ldflags=ldflags,
        snippets=snippets, key_parts=[flags.identity], library_name=name,
        # One PCH serves every extension built with the same flags: the module
        # name and the user's include paths do not enter torch's headers.
        pch_header="#include <torch/extension.h>\n" if use_pch and not no_implicit_headers
        else None, pch_cflags=shared, what=f"C++ extension {name!r}", verbose=verbose,
    )
    if build_directory is not None:
        path = _copy_into(path, Path(build_directory), name, source)
    if not is_python_module:
        torch.ops.load_library(str(path))
        return str(path)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Builds of each extension name loaded by this process, in order (their inputs).
_VERSIONS: dict[str, list[str]] = {}


def _versioned(name: str, inputs: str) -> str:
    """``name`` for the first build of that name in this process, ``name_v1``, ``name_v2``
    ... for later different ones, as torch names them: pybind11 keeps one module per
    name and process, so a changed extension loaded under the old name would be
    the old module."""
    seen = _VERSIONS.setdefault(name, [])
    if inputs not in seen:
        seen.append(inputs)
    version = seen.index(inputs)
    return name if version == 0 else f"{name}_v{version}"


def _bindings(functions: str | list[str] | dict[str, str] | None,
              error_handling: bool) -> str:
    """torch's generated ``PYBIND11_MODULE`` for ``functions`` (empty without any)."""
    if functions is None:
        return ""
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, list):
        functions = {f: f for f in functions}
    elif not isinstance(functions, dict):
        # torch's own error and type: code catching it keeps working.
        raise ValueError(
            f"Expected 'functions' to be a list or dict, but was {type(functions)}")
    lines = ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"]
    for function, doc in functions.items():
        wrapped = f"torch::wrap_pybind_function({function})" if error_handling else function
        lines.append(f'm.def("{function}", {wrapped}, "{doc}");')
    lines.append("}")
    return "\n".join(lines)


def _main_source(sources: list[str], bindings: str, *,
                 implicit_header: bool) -> tuple[str, dict[str, str]]:
    """main.cpp as torch writes it, with ``#line`` markers so that diagnostics name
    ``cpp_sources[i]`` and ``functions`` in their own numbering."""
    parts = ["#include <torch/extension.h>"] if implicit_header else []
    snippets = {}
    for i, text in enumerate(sources):
        snippets[f"cpp_sources[{i}]"] = text
        parts += [f'#line 1 "cpp_sources[{i}]"', text]
    if bindings:
        snippets["functions"] = bindings
        parts += ['#line 1 "functions"', bindings]
    return "\n".join(parts) + "\n", snippets


def _copy_into(library: Path, directory: Path, name: str, source: str) -> Path:
    """``<directory>/<name>.so`` and ``main.cpp``, each written atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(library, "rb") as built:
        target = atomic_write(directory / f"{name}.so", lambda f: shutil.copyfileobj(built, f))
    atomic_write_text(directory / "main.cpp", source)
    return target
