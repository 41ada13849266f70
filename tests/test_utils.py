"""torch.utils.benchmark's module paths under opbench (``opbench.utils``, ``opbench.op_fuzzers``)
and torch's values taken where opbench takes its own.

The modules and their public names are listed from the installed torch itself (pkgutil,
``__all__``), so a torch release that adds one fails here until opbench has it. Code that
swaps the package (``sys.modules["torch.utils.benchmark"] = opbench``) finds the same paths,
and pickles that name torch's classes load as opbench's there.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import pickle
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import opbench
from conftest import strip_object_line

torch = pytest.importorskip("torch")
import torch.utils.benchmark as tb  # noqa: E402

PACKAGE = Path(opbench.__file__).resolve().parent
ROOT = "torch.utils.benchmark"
# torch's `examples` are scripts (`python -m torch.utils.benchmark.examples.fuzzer`), each a
# main() over `torch.utils.benchmark` that nothing imports; opbench's tests run them against
# opbench (test_recipe.py) instead of keeping copies under its own name.
NOT_MIRRORED = {f"{ROOT}.examples": "torch's example scripts, not API"}


def _torch_modules() -> list[str]:
    names = [ROOT] + [m.name for m in pkgutil.walk_packages(tb.__path__, ROOT + ".")]
    return sorted(n for n in names if not any(n == x or n.startswith(x + ".") for x in NOT_MIRRORED))


def _own_names(module) -> set[str]:
    """What the module offers: ``__all__``, else the public names its own code binds
    (definitions, assignments, and for a package what it star-imports), plus the private
    helpers torch documents as exported ("exported solely so that microbenchmarks can
    reuse the util")."""
    names = getattr(module, "__all__", None)
    tree = ast.parse(Path(inspect.getfile(module)).read_text())  # an empty __init__ too
    if names is None:
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {t.id for t in targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.ImportFrom) and node.names[0].name == "*":
                names |= _own_names(importlib.import_module(node.module))
        names = {n for n in names if not n.startswith("_")}
    exported = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
                and node.name.startswith("_") and "exported" in (ast.get_docstring(node) or "")}
    return set(names) | exported


TORCH_MODULES = _torch_modules()


def _ours(torch_name: str) -> str:
    return "opbench" + torch_name[len(ROOT):]


def test_torchs_modules_are_listed_from_torch() -> None:
    # The walk finds what torch 2.1-2.14 all have, and the exclusion still names a module.
    assert {f"{ROOT}.utils.timer", f"{ROOT}.utils.common", f"{ROOT}.utils._stubs",
            f"{ROOT}.utils.valgrind_wrapper.timer_interface", f"{ROOT}.op_fuzzers.spectral"
            } <= set(TORCH_MODULES)
    assert all(importlib.util.find_spec(name) for name in NOT_MIRRORED)
    assert "_make_temp_dir" in _own_names(importlib.import_module(f"{ROOT}.utils.common"))


@pytest.mark.parametrize("name", TORCH_MODULES)
def test_every_torch_module_path_is_a_real_opbench_module_with_its_names(name: str) -> None:
    module = importlib.import_module(_ours(name))
    # A file at torch's relative path, not an alias of another module.
    relative = PACKAGE.joinpath(*_ours(name).split(".")[1:])
    origin = Path(module.__spec__.origin).resolve()
    assert origin in (relative.with_name(relative.name + ".py"), relative / "__init__.py")
    missing = sorted(n for n in _own_names(importlib.import_module(name))
                     if not hasattr(module, n))
    assert not missing, f"{_ours(name)} lacks {missing}"


def test_the_names_are_opbenchs_own_objects() -> None:
    from opbench.engines.python import default_timer
    from opbench.utils import common, compare, timer
    from opbench.utils.valgrind_wrapper import timer_interface

    assert common.Measurement is opbench.Measurement and common.TaskSpec is opbench.TaskSpec
    assert timer.Timer is opbench.Timer and timer.Language is opbench.Language
    assert timer.timer is default_timer  # the clock function, as in torch, not the module
    assert compare.Compare is opbench.Compare
    assert timer_interface.CallgrindStats is opbench.CallgrindStats
    assert importlib.import_module("opbench.op_fuzzers.binary").BinaryOpFuzzer is \
        importlib.import_module("opbench.fuzz.op_fuzzers.binary").BinaryOpFuzzer


def test_submodules_are_attributes_once_the_package_is_imported() -> None:
    # torch code reaches them through the package: benchmark.utils.common.Measurement.
    assert opbench.utils.valgrind_wrapper.timer_interface.CopyIfCallgrind is opbench.CopyIfCallgrind
    assert "common" in dir(opbench.utils)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        opbench.utils.nothing


def _run(code: str, cwd: Path | None = None, swap: bool = False) -> str:
    code = (_SWAP if swap else "") + textwrap.dedent(code)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


_SWAP = "import sys, opbench\nsys.modules['torch.utils.benchmark'] = opbench\n"


def test_the_swapped_package_finds_every_path() -> None:
    out = _run(f"""
        import importlib, json
        found = {{}}
        for name, names in json.loads({json.dumps(json.dumps(
            {n: sorted(_own_names(importlib.import_module(n))) for n in TORCH_MODULES}))}).items():
            module = importlib.import_module(name)
            found[name] = [n for n in names if not hasattr(module, n)]
        from torch.utils.benchmark.utils.timer import Language
        print(json.dumps([found, Language is opbench.Language]))
    """, swap=True)
    missing, same = json.loads(out)
    assert same and not {k: v for k, v in missing.items() if v}


# -- torch's values where opbench takes its own ------------------------------------------

def test_torchs_language_is_taken_by_opbenchs_timer_and_the_reverse() -> None:
    assert opbench.Timer("pass", language=tb.Language.PYTHON).language is opbench.Language.PYTHON
    # C++ compiles on the first measurement: constructing one needs no compiler.
    assert opbench.Timer("int x = 1;", language=tb.Language.CPP).language is opbench.Language.CPP
    # opbench's values, even from a pickle, work with torch's Timer.
    language = pickle.loads(pickle.dumps(opbench.Language.PYTHON))
    assert tb.Timer("pass", language=language)._language is tb.Language.PYTHON
    assert tb.Language.CPP == opbench.Language.CPP and opbench.Language.CPP == tb.Language.CPP
    assert opbench.Language.CPP != tb.Language.PYTHON
    assert {opbench.Language.CPP: 1}[tb.Language.CPP] == 1
    with pytest.raises(ValueError, match="Invalid language"):
        opbench.Timer("pass", language=0)  # torch rejects the bare value too


def test_torchs_copy_if_callgrind_is_unwrapped_like_opbenchs() -> None:
    wrapped = tb.CopyIfCallgrind(3)
    assert isinstance(wrapped, opbench.CopyIfCallgrind)
    assert opbench.CopyIfCallgrind.unwrap_all({"n": wrapped}) == {"n": 3}
    assert opbench.Timer("n + 1", globals={"n": wrapped}).timeit(10).median > 0
    assert not isinstance(3, opbench.CopyIfCallgrind)


def _torch_objects() -> dict[str, object]:
    timer = tb.Timer("x + 1", setup="x = 1", label="add", sub_label="int", description="d")
    m = timer.timeit(1000)
    compare = tb.Compare([m])
    compare.colorize(rowwise=True)
    counts = tb.FunctionCounts((tb.FunctionCount(700, "a.c:f"), tb.FunctionCount(300, "b.c:g")),
                               inclusive=False, truncate_rows=False)
    stats = tb.CallgrindStats(
        task_spec=m.task_spec, number_per_run=100, built_with_debug_symbols=False,
        baseline_inclusive_stats=counts, baseline_exclusive_stats=counts,
        stmt_inclusive_stats=counts, stmt_exclusive_stats=counts, stmt_callgrind_out=None)
    return {"language": tb.Language.CPP, "measurement": m, "task_spec": m.task_spec,
            "compare": compare, "stats": stats, "copy": tb.CopyIfCallgrind(3),
            "count": tb.FunctionCount(5, "f")}


def test_torchs_pickles_load_as_opbench_objects_under_the_swap(tmp_path: Path) -> None:
    objects = _torch_objects()
    (tmp_path / "torch.pkl").write_bytes(pickle.dumps(objects))
    out = _run("""
        import json, pickle
        objects = pickle.loads(open("torch.pkl", "rb").read())
        m, stats = objects["measurement"], objects["stats"]
        print(json.dumps({
            "classes": {k: type(v).__module__.split(".")[0] for k, v in objects.items()},
            "language": objects["language"] is opbench.Language.CPP,
            "measurement": repr(m), "compare": str(objects["compare"]), "stats": repr(stats),
            "counts": [stats.counts(), repr(stats.stats())],
            "copy": opbench.CopyIfCallgrind.unwrap_all({"n": objects["copy"]})["n"],
        }))
    """, cwd=tmp_path, swap=True)
    loaded = json.loads(out)
    assert set(loaded["classes"].values()) == {"opbench"} and loaded["language"]
    assert strip_object_line(loaded["measurement"]) == strip_object_line(repr(objects["measurement"]))
    assert loaded["compare"] == str(objects["compare"])
    assert strip_object_line(loaded["stats"]) == strip_object_line(repr(objects["stats"]))
    assert loaded["counts"][0] == objects["stats"].counts() == 1000
    assert strip_object_line(loaded["counts"][1]) == strip_object_line(repr(objects["stats"].stats()))
    assert loaded["copy"] == 3


# -- a worker written for torch.utils.benchmark ------------------------------------------

WORKER = '''
"""A benchmark worker as PyTorch's instruction-count suite writes them: it reads pickled
Timer arguments (Language included), measures wall time, then instructions."""
import dataclasses, pickle, sys, timeit
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.utils.benchmark.utils.timer import Language, Timer
    from torch.utils.benchmark.utils.valgrind_wrapper.timer_interface import CallgrindStats
else:
    from torch.utils.benchmark import CallgrindStats, Language, Timer


@dataclasses.dataclass(frozen=True)
class WorkerTimerArgs:
    stmt: str
    setup: str = "pass"
    global_setup: str = ""
    num_threads: int = 1
    language: Language = Language.PYTHON


def main(path):
    with open(path, "rb") as f:
        args = WorkerTimerArgs(**pickle.load(f))
    timer = Timer(stmt=args.stmt, setup=args.setup or "pass", global_setup=args.global_setup,
                  timer=timeit.default_timer, num_threads=args.num_threads,
                  language=args.language)
    m = timer.blocked_autorange(min_run_time=0.1)
    stats = timer.collect_callgrind(number=100, collect_baseline=False, repeats=5,
                                    retain_out_file=False)
    assert all(isinstance(s, CallgrindStats) for s in stats)
    with open(path, "wb") as f:
        pickle.dump((tuple(m.times), tuple(s.counts(denoise=True) for s in stats)), f)


if __name__ == "__main__":
    main(sys.argv[1])
'''

ITEMS = {
    "python": dict(stmt="x += 1", setup="x = torch.ones((4, 4))", language="PYTHON"),
    "c++": dict(stmt="x += 1.0;", setup="auto x = torch::ones({4, 4});", language="CPP"),
}


@pytest.mark.slow
@pytest.mark.parametrize("form", ["swap", "import line"])
@pytest.mark.parametrize("item", sorted(ITEMS))
def test_a_torch_worker_runs_unchanged(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
                                       form: str, item: str) -> None:
    from cpp_cache import torch_cache_dir
    from opbench.callgrind.collect import callgrind_unavailable_reason

    reason = callgrind_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    worker = tmp_path / "worker.py"
    if form == "swap":  # the worker as written, started with the package swapped
        worker.write_text(WORKER)
        start = [sys.executable, "-c", _SWAP + "import runpy; sys.argv = sys.argv[1:]; "
                 "runpy.run_path(sys.argv[0], run_name='__main__')", str(worker)]
    else:  # one line changed: the import
        worker.write_text(WORKER.replace("from torch.utils.benchmark import", "from opbench import"))
        start = [sys.executable, str(worker)]
    # The runner pickles the arguments with torch's Language, as PyTorch's suite does.
    spec = dict(ITEMS[item], language=getattr(tb.Language, ITEMS[item]["language"]))
    payload = tmp_path / "args.pkl"
    payload.write_bytes(pickle.dumps(spec))
    env = dict(os.environ, OPBENCH_CACHE_DIR=str(torch_cache_dir(tmp_path_factory)))
    proc = subprocess.run([*start, str(payload)], capture_output=True, text=True, timeout=900,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    times, counts = pickle.loads(payload.read_bytes())
    assert times and all(t > 0 for t in times)
    assert len(counts) == 5 and all(c > 0 for c in counts)
    assert max(counts) - min(counts) <= 0.01 * max(counts)  # repeats agree
