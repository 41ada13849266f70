"""The type stub of opbench._C names exactly what the extension defines, so it cannot drift."""
from __future__ import annotations

import ast
import pathlib

import opbench
from opbench import _C

STUB = pathlib.Path(opbench.__file__).with_name("_C.pyi")
# Stub classes that type a submodule of the extension, not a class of it.
SUBMODULES = {"_Callgrind": "callgrind", "_Memory": "memory", "_PythonFrames": "python_frames"}


def _stub_names() -> tuple[set[str], dict[str, set[str]]]:
    tree = ast.parse(STUB.read_text())
    top: set[str] = set()
    members: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {
                n.name if isinstance(n, ast.FunctionDef) else n.target.id
                for n in node.body if isinstance(n, (ast.FunctionDef, ast.AnnAssign))
            }
    return top - set(SUBMODULES), members


def _public(obj) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("__") and n != "_pybind11_conduit_v1_"}


def test_stub_matches_module():
    top, members = _stub_names()
    assert top == _public(_C)
    for cls in ("CudaContext", "CudaEvent", "SchedProbe"):
        assert members[cls] - {"__init__"} == _public(getattr(_C, cls))
    for cls, submodule in SUBMODULES.items():
        assert members[cls] == _public(getattr(_C, submodule))


# -- signatures ------------------------------------------------------------------

def _pybind_type(text: str) -> str | None:
    """pybind11's spelling of a type in opbench's stub spelling; None: says nothing
    (``object``, an unnamed C++ type)."""
    text = text.strip().replace("typing.SupportsInt | typing.SupportsIndex", "int")
    if text == "object" or "::" in text:
        return None
    return text.replace("opbench._C.", "")


def _split_params(text: str) -> list[str]:
    params, depth, current = [], 0, ""
    for ch in text:
        depth += (ch in "[(" and 1) or (ch in "])" and -1) or 0
        if ch == "," and depth == 0:
            params.append(current.strip())
            current = ""
        else:
            current += ch
    return params + ([current.strip()] if current.strip() else [])


def _binding_signature(fn) -> tuple[list[tuple[str, str | None, str | None]], str | None] | None:
    """[(name, type, default)], return type: from pybind11's docstring; None when the
    function has no signature line (a plain C function)."""
    doc = (fn.__doc__ or "").splitlines()
    line = next((d for d in doc if "(" in d and "->" in d), None)
    if line is None or "(" not in line.split("->")[0]:
        return None
    inside, ret = line[line.index("(") + 1:line.rindex(")")], line.rsplit("->", 1)[1]
    out = []
    for p in _split_params(inside):
        name, _, rest = p.partition(":")
        typ, _, default = rest.partition("=")
        if name.strip() != "self":
            out.append((name.strip(), _pybind_type(typ), default.strip() or None))
    return out, _pybind_type(ret)


def _stub_signature(node: ast.FunctionDef) -> tuple[list[tuple[str, str, str | None]], str]:
    args = [a for a in node.args.args if a.arg != "self"]
    defaults = [None] * (len(args) - len(node.args.defaults)) + [
        ast.unparse(d) for d in node.args.defaults]
    return ([(a.arg, ast.unparse(a.annotation), d) for a, d in zip(args, defaults)],
            ast.unparse(node.returns))


def _same_type(binding: str | None, stub: str) -> bool:
    if binding is None:
        return True
    if binding in ("dict", "list", "tuple"):  # pybind11 gives no parameters for these
        return stub.split("[")[0] == binding
    return binding == stub


def _stub_functions():
    tree = ast.parse(STUB.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, getattr(_C, node.name), node
        elif isinstance(node, ast.ClassDef):
            owner = getattr(_C, SUBMODULES.get(node.name, node.name))
            for n in node.body:
                if isinstance(n, ast.FunctionDef):
                    yield f"{node.name}.{n.name}", getattr(owner, n.name), n


def test_stub_signatures_match_the_bindings():
    problems = []
    for name, fn, node in _stub_functions():
        binding = _binding_signature(fn)
        if binding is None:
            continue
        (b_params, b_ret), (s_params, s_ret) = binding, _stub_signature(node)
        if [(n, d) for n, _, d in b_params] != [(n, d) for n, _, d in s_params]:
            problems.append(f"{name}: parameters {b_params} vs stub {s_params}")
        problems += [f"{name}({n}): {bt} vs stub {st}"
                     for (n, bt, _), (_, st, _) in zip(b_params, s_params)
                     if not _same_type(bt, st)]
        if name != "CudaContext.__init__" and not _same_type(b_ret, s_ret):
            problems.append(f"{name} returns {b_ret} vs stub {s_ret}")
    assert not problems, "\n".join(problems)
