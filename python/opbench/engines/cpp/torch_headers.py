"""Which of torch's headers a C++ statement is compiled against.

torch's Timer compiles every C++ statement against the whole C++ frontend
(``<torch/extension.h>`` to time it, ``<torch/torch.h>`` under callgrind):
``torch::nn``, ``torch::jit``, ``torch::optim`` and the rest are always in
scope, and g++ spends most of a minute parsing them. opbench gives every
statement what torch's sees, parsing only what can change its meaning:

* ``types``: ``<torch/types.h>`` (tensors, their operators and methods,
  scalar types, autograd's variables, every ATen operator) with the
  declarations of the operators the code does not name left out: torch's
  own ``ATen/Functions.h`` and ``ATen/NativeFunctions.h``, copied without
  their per-operator includes into a folder searched before torch's
  (``overlay``), and one ``<ATen/ops/NAME.h>`` per name of an operator in
  the code. Every name the code uses is declared exactly as the whole
  header declares it (an operator's header holds all its overloads), so
  code that compiles means the same; a name left out is a compile error,
  never a different overload. It compiles in about four fifths of the whole
  header's time and precompiles in about three fifths
  (``benchmarks/cpp.py --phases``).
* ``torch``: ``<torch/torch.h>``, the whole frontend, for code that names a
  part of it beyond ``<torch/types.h>`` (``nn::``, ``optim::``, ``jit::``,
  ``torch::save``, an ``#include`` of torch's other headers, ...), and for
  code that did not compile against ``types`` for want of a name.
* ``extension``: ``<torch/extension.h>``, the frontend with Python and
  pybind11, for code that includes it or names Python's API (``py::``,
  ``PyObject``), as torch's timing build sees it.

``<c10/util/irange.h>`` comes with every set, as in torch's templates.

    >>> choose("auto y = x + 1;", "auto x = torch::ones({2});").name
    'types'
    >>> choose("auto y = model->forward(x);", "torch::nn::Linear model(4, 2);").name
    'torch'
    >>> choose("int y = 1;") is None
    True
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from opbench._ownership import private_folder
from opbench.engines.cpp import build
from opbench.engines.cpp.build import TorchFlags

__all__ = ["EXTENSION", "FRONTEND", "HeaderSet", "choose", "flags_unimported", "missing_name",
           "needed_frontend", "overlay", "remember_frontend", "uses_torch"]

# Code that names torch's namespaces, headers or macros (TORCH_CHECK, AT_DISPATCH_...)
# needs libtorch; everything else compiles against opbench's headers only (a second).
_TORCH_INCLUDE = re.compile(r"#\s*include\s*[<\"](?:torch|ATen|c10)/")
_TORCH_NAME = re.compile(r"\b(?:torch|at|c10|caffe2)::|\busing\s+namespace\s+(?:torch|at|c10)\b"
                         r"|\b(?:TORCH|C10)_[A-Z]\w*|\bAT_(?:DISPATCH|ASSERT|ERROR|CHECK|FORALL)\w*")
_INCLUDE = re.compile(r"#\s*include\s*[<\"]([^>\"]+)[>\"]")
# Namespaces of the frontend beyond <torch/types.h>, named qualified (torch::nn::)
# or, after `using namespace torch;`, bare (nn::).
_FRONTEND_NAMESPACE = re.compile(
    r"(?:(?<![\w:])|\btorch::)(?:nn|optim|jit|data|serialize|fft|special|linalg|nested|sparse"
    r"|cuda|mps|xpu|python|autograd|enumtype|nativert|detail)\s*::")
# Names the frontend declares in namespace torch itself (utils.h, serialize.h, enum.h, ...).
_FRONTEND_NAME = re.compile(
    r"\btorch::(?:save|load|pickle_save|pickle_load|NoGradGuard|AutoGradMode|ExpandingArray\w*"
    r"|OrderedDict|IMethod|equal_if_defined|set_printoption\w*|get_printoption\w*)\b")
# The frontend's enum values (torch::kReLU, torch::kMean: enum.h); <torch/types.h>'s own
# constants (torch::kFloat32) are not among them.
_TORCH_K = re.compile(r"\btorch::k(\w+)")
# Python's and pybind11's API, which only <torch/extension.h> brings.
_PYTHON = re.compile(r"(?<![\w:])(?:py|pybind11)::|\bPyObject\b|\bPy_[A-Z]\w*|\bTHP\w+|torch::python::")
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_COMMENT_OR_STRING = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"", re.DOTALL)
# g++'s words for what a wider header set could supply: a name (or overload, or
# member) that no header declared, or an inline function it never defined.
_NAME_ERROR = re.compile(
    r"not declared|has not been declared|is not a member of|does not name a|no matching function"
    r"|no member named|is not a namespace|no match for|incomplete type|undefined reference"
    r"|was not declared")
_OP_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<ATen/ops/(\w+)\.h>[ \t]*\n", re.MULTILINE)
_CALLED = re.compile(r"\bat::(\w+)\s*\(")


@dataclass(frozen=True)
class HeaderSet:
    """A set of torch's headers: ``name`` (``types``, ``torch``, ``extension``), the headers
    every statement compiled with it includes (``shared``: what is precompiled), the ATen
    operators this statement includes one by one (``ops``, ``types`` only), and whether it
    builds as torch's Python extensions do (Python's headers, ``libtorch_python``)."""

    name: str
    shared: tuple[str, ...]
    ops: tuple[str, ...] = ()
    python_extension: bool = False

    @property
    def pruned(self) -> bool:
        """Whether torch's all-operator headers are replaced by the ``overlay``."""
        return self.name == "types"

    def shared_text(self) -> str:
        """The ``#include`` lines every statement with this set shares (precompiled)."""
        return "".join(f"#include <{h}>\n" for h in self.shared)

    def source_text(self) -> str:
        """The ``#include`` lines of this statement's source."""
        return self.shared_text() + "".join(f"#include <ATen/ops/{op}.h>\n" for op in self.ops)


_IRANGE = "c10/util/irange.h"
FRONTEND = HeaderSet("torch", ("torch/torch.h", _IRANGE))
EXTENSION = HeaderSet("extension", ("torch/extension.h", _IRANGE), python_extension=True)


def uses_torch(*code: str) -> bool:
    """Whether any of the snippets needs torch's headers and libraries."""
    return any(_TORCH_INCLUDE.search(c) or _TORCH_NAME.search(_code_only(c)) for c in code)


def _code_only(code: str) -> str:
    """``code`` without its comments and string literals."""
    return _COMMENT_OR_STRING.sub(" ", code)


def choose(*code: str) -> HeaderSet | None:
    """The header set for code made of these snippets (stmt, setup, global_setup); None
    for code that does not use torch."""
    if not uses_torch(*code):
        return None
    text = _code_only("\n".join(code))
    includes = [m[1] for c in code for m in _INCLUDE.finditer(c)]
    if "torch/extension.h" in includes or _PYTHON.search(text):
        return EXTENSION
    torch_includes = [h for h in includes if h.startswith("torch/") and h != "torch/types.h"]
    if torch_includes or _FRONTEND_NAMESPACE.search(text) or _FRONTEND_NAME.search(text):
        return FRONTEND
    if any(k in _enum_values() for k in _TORCH_K.findall(text)):
        return FRONTEND
    ops = _operators()
    named = sorted({t for t in _IDENTIFIER.findall(text) if t in ops})
    return HeaderSet("types", ("torch/types.h", _IRANGE), tuple(named))


def missing_name(compiler_output: str) -> bool:
    """Whether a compile error is one a wider header set could fix (a name, overload or
    definition no header supplied), rather than a mistake in the code."""
    return bool(_NAME_ERROR.search(compiler_output))


def _include_root() -> Path | None:
    """torch's include folder, found without importing torch (None if torch is missing)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "include"
    return root if root.is_dir() else None


def flags_unimported(python_extension: bool = False) -> TorchFlags | None:
    """``build.torch_flags`` read from torch's files without importing torch (a second and
    a half a first build can overlap with the import instead of waiting for it), or None
    where the files do not say: callers compare with ``build.torch_flags()`` afterwards."""
    include = _include_root()
    if include is None:
        return None
    torch_dir = include.parent
    try:
        version = ast.parse((torch_dir / "version.py").read_text())
        constants = {t.id: node.value.value for node in version.body
                     if isinstance(node, (ast.Assign, ast.AnnAssign))
                     and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                     for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                     if isinstance(t, ast.Name)}
        # Only a library built with the C++11 string ABI names std::__cxx11.
        abi = b"__cxx11" in (torch_dir / "lib" / "libc10.so").read_bytes()
    except (OSError, SyntaxError, ValueError):
        return None
    identity = f"torch {constants.get('__version__')} {constants.get('git_version', '')}"
    return build.flags_for([str(include), str(include / "torch" / "csrc" / "api" / "include")],
                           [str(torch_dir / "lib")], abi, identity, python_extension)


@functools.cache
def _operators() -> frozenset[str]:
    """The names of ATen's operators (one ``ATen/ops/NAME.h`` each) in the installed torch."""
    root = _include_root()
    if root is None:
        return frozenset()
    suffixes = ("_ops", "_native", "_meta", "_dispatch", "_compositeimplicitautograd",
                "_compositeexplicitautograd", "_compositeexplicitautogradnonfunctional")
    names = (n[:-2] for n in os.listdir(root / "ATen" / "ops") if n.endswith(".h"))
    return frozenset(n for n in names if not any(s in n for s in suffixes))


@functools.cache
def _enum_values() -> frozenset[str]:
    """The enum values the frontend declares in namespace torch (``TORCH_ENUM_DECLARE(ReLU)``
    in ``torch/enum.h``: ``torch::kReLU``), without the ``k``."""
    root = _include_root()
    enum_h = None if root is None else root / "torch" / "csrc" / "api" / "include" / "torch" / "enum.h"
    if enum_h is None or not enum_h.is_file():
        return frozenset()
    return frozenset(re.findall(r"TORCH_ENUM_DECLARE\((\w+)\)", enum_h.read_text()))


def overlay_files(root: Path) -> dict[str, str]:
    """torch's ``ATen/Functions.h`` and ``ATen/NativeFunctions.h`` (under ``root``) without
    their per-operator includes: their own declarations stay (Functions.h ends with
    overloads such as ``at::var(const Tensor&, int dim)``), with the operators those call."""
    files = {}
    for name in ("Functions.h", "NativeFunctions.h"):
        own = _OP_INCLUDE.sub("", (root / "ATen" / name).read_text())
        called = sorted(set(_CALLED.findall(own)) & _operators())
        files[f"ATen/{name}"] = _before_code(own, "".join(f"#include <ATen/ops/{op}.h>\n"
                                                          for op in called))
    return files


def _before_code(text: str, lines: str) -> str:
    """``text`` with ``lines`` inserted after its last ``#include``."""
    ends = [m.end() for m in re.finditer(r"^[ \t]*#[ \t]*include[^\n]*\n", text, re.MULTILINE)]
    at = ends[-1] if ends else 0
    return text[:at] + lines + text[at:]


def overlay(cache: Path) -> Path:
    """The folder, searched before torch's, that holds the pruned ``ATen`` headers for the
    installed torch: ``<cache>/pch/overlay-<hash of their text>/``, written once
    (atomically) and shared by every build.

    Raises:
        ImportError: torch is not installed.
    """
    root = _include_root()
    if root is None:
        raise ImportError("this C++ code uses torch (torch::, at::, c10::), which needs torch: "
                          "pip install torch")
    files = overlay_files(root)
    digest = hashlib.sha256("\0".join(f"{k}\0{v}" for k, v in sorted(files.items())).encode())
    folder = private_folder(cache / "pch", what="load compiled code from",
                            fix="Set $OPBENCH_CACHE_DIR to a folder of your own.")
    target = folder / f"overlay-{digest.hexdigest()[:16]}"
    if all(_holds(target / k, v) for k, v in files.items()):
        return target
    work = Path(tempfile.mkdtemp(prefix=".overlay-", dir=folder))
    try:
        for name, text in files.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text)
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)  # damaged: its text is not ours
        try:
            os.rename(work, target)
        except OSError:
            if not all(_holds(target / k, v) for k, v in files.items()):
                raise  # not "another process published the same folder first"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _code_marker(cache: Path, code: tuple[str, ...]) -> Path:
    digest = hashlib.sha256("\0".join(code).encode()).hexdigest()[:32]
    return cache / "pch" / "frontend" / digest


def remember_frontend(cache: Path, code: tuple[str, ...]) -> None:
    """Notes that this code needed the whole frontend (it did not compile against
    ``types``), so that no process tries ``types`` for it again."""
    marker = _code_marker(cache, code)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def needed_frontend(cache: Path, code: tuple[str, ...]) -> bool:
    """Whether ``remember_frontend`` noted this code (in any process)."""
    return _code_marker(cache, code).is_file()


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text() == text
    except OSError:
        return False
