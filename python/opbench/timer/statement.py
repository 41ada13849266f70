"""What a Timer times: the statement's language, its text, and the engine that runs it.

``Timer.__init__`` hands its arguments here: the code is normalised as torch
normalises it (dedented, the leading newline dropped), checked for syntax before
anything runs, given ``torch`` when it names it without importing it, and handed
to its engine (``opbench.engines``: Python, C++, CUDA device time).
"""
from __future__ import annotations

import enum
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opbench.callgrind.globals import CopyIfCallgrind
from opbench.core.identity import describe_callable
from opbench.engines import Engine, as_engine
from opbench.engines.python import PythonEngine, check_syntax

__all__ = ["Language", "Statement", "prepare"]


class Language(enum.Enum):
    """The language of a Timer's statement.

    torch's members (``torch.utils.benchmark.utils.timer.Language``) compare equal to
    these, both ways, so arguments built with either enum work with either Timer:

        >>> import enum
        >>> TorchLanguage = enum.Enum("Language", "PYTHON CPP", start=0,
        ...                           module="torch.utils.benchmark.utils.timer")
        >>> TorchLanguage.CPP == Language.CPP, Language.CPP in (TorchLanguage.CPP,)
        (True, True)
    """

    PYTHON = 0
    CPP = 1

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Language):
            return self is other
        kind = type(other)
        if (isinstance(other, enum.Enum) and kind.__name__ == "Language"
                and kind.__module__.startswith("torch.utils.benchmark")):
            return other.name == self.name
        return NotImplemented

    # Members of both enums hash by name: one dict key.
    __hash__ = enum.Enum.__hash__


def _normalize(src: str) -> str:
    """Dedents and drops the leading newline of block strings, as torch does, so
    code written inside a function neither fails to parse nor prints oddly."""
    src = textwrap.dedent(src)
    return (src[1:] if src and src[0] == "\n" else src).rstrip()


def _names_used(code: Any) -> set[str]:
    """Every global-ish name a code object (and the code nested in it) refers to."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names_used(const)
    return names


def _provide_torch(globals_: dict[str, Any], codes: list[Any]) -> None:
    """Makes ``torch`` available to code that uses it without importing it, as torch's
    Timer does, but imports torch only when the code actually names it."""
    if "torch" in globals_:
        return
    if not any("torch" in _names_used(code) for code in codes):
        return
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            "the statement uses `torch`, which is not installed: pip install torch"
        ) from e
    globals_["torch"] = torch


@dataclass
class Statement:
    """A Timer's statement made ready: its language, its text and setup as TaskSpec shows
    them, the globals it runs in (a copy), and the engine that runs it."""

    language: Language
    stmt_text: str
    setup_text: str
    globals: dict[str, Any]
    engine: Engine


def prepare(engine_cls: type, stmt: str | Callable[[], Any], setup: str | Callable[[], Any],
            global_setup: str, timer: Callable[[], float], globals: dict[str, Any] | None,
            language: Language | str, *, device_timing: str | None, l2_cache: str,
            device: Any, setup_per_block: bool, layouts: int) -> Statement:
    """The engine for ``stmt`` in ``language`` (``engine_cls`` for Python: a Timer's
    ``_timer_cls``), with the checks torch makes and the ones it leaves to the first run.

    ``stmt`` and ``setup`` are strings of code or zero-argument callables (checked by
    the Timer).

    Raises:
        TypeError: a callable for C++.
        SyntaxError: ``stmt`` or ``setup`` does not parse.
        ValueError: a bad ``language``, or an argument its language does not take.
    """
    # A copy, so `exec` adding __builtins__ (or us adding torch) never
    # leaks into the caller's dict.
    globals_ = dict(globals or {})
    stmt_text = describe_callable(stmt) if callable(stmt) else _normalize(stmt)
    setup_text = describe_callable(setup) if callable(setup) else _normalize(setup)

    engine_kwargs: dict[str, Any] = {}
    if language in (Language.PYTHON, "py", "python"):
        chosen = Language.PYTHON
        if global_setup:
            raise ValueError(
                f"global_setup is C++ only, got `{global_setup}`. Most likely this code "
                "can simply be moved to `setup`."
            )
        if layouts != 1:
            raise ValueError("layouts is C++ only (a study of compiled code's placement)")
        # Compiled here too, not only by the engine: a swapped-in _timer_cls
        # (a mock) must not let a syntax error through.
        codes = [
            check_syntax(text, what)
            for code, text, what in ((stmt, stmt_text, "stmt"), (setup, setup_text, "setup"))
            if not callable(code)
        ]
        _provide_torch(globals_, codes)
    elif language in (Language.CPP, "cpp", "c++"):
        if callable(stmt) or callable(setup):
            raise TypeError("C++ timers take stmt and setup as strings of C++ code")
        if engine_cls is not PythonEngine:
            raise AssertionError("_timer_cls has already been swapped.")
        from opbench.engines.cpp.engine import CppEngine

        engine_cls = CppEngine
        chosen = Language.CPP
        setup_text = "" if setup_text == "pass" else setup_text
        engine_kwargs = {"global_setup": global_setup, "setup_per_block": setup_per_block,
                         "layouts": layouts}
    else:
        raise ValueError(f"Invalid language `{language}`.")

    run_globals = CopyIfCallgrind.unwrap_all(globals_)
    engine: Engine = as_engine(engine_cls(
        stmt=stmt if callable(stmt) else stmt_text,
        setup=setup if callable(setup) else setup_text,
        timer=timer,
        globals=run_globals,
        **engine_kwargs,
    ))
    if device_timing is not None:
        from opbench.engines.cuda.engine import DeviceEngine

        engine = DeviceEngine(engine, device_timing, l2_cache, device, globals_)
    return Statement(chosen, stmt_text, setup_text, run_globals, engine)
