"""The type stub of opbench._C names exactly what the extension defines, so it cannot drift."""
from __future__ import annotations

import ast
import pathlib

import opbench
from opbench import _C

STUB = pathlib.Path(opbench.__file__).with_name("_C.pyi")


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
    return top - {"_Callgrind"}, members


def _public(obj) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("__") and n != "_pybind11_conduit_v1_"}


def test_stub_matches_module():
    top, members = _stub_names()
    assert top == _public(_C)
    for cls in ("CudaContext", "CudaEvent"):
        assert members[cls] - {"__init__"} == _public(getattr(_C, cls))
    assert members["_Callgrind"] == _public(_C.callgrind)
