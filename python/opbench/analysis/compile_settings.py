"""The settings a compiled function is measured in, and the Dynamo cache it starts from.

The thread opbench was created from measured ``x + 1`` three ways, and so does
``opbench.analysis.compile.overheads``: ``requires_grad=False``, ``requires_grad=True``
(floating-point tensor arguments require grad; AOTAutograd then runs its
autograd Function) and ``inference_mode`` (entered once around the whole
measurement, as a serving loop would; the arguments made inside it, as the
thread made them). Each compiled cell starts from an empty Dynamo cache for the
function's code, so its first call compiles and its guards are its own.

Example:
    >>> import torch
    >>> [a.requires_grad for a in call_args(torch, [torch.ones(2), 3], "requires_grad=True")[:1]]
    [True]
"""
from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

__all__ = ["COLUMNS", "cache_entries", "call_args", "reset_cache", "setting"]

COLUMNS = ("requires_grad=False", "requires_grad=True", "inference_mode")


def call_args(torch: Any, values: Sequence[Any], column: str) -> list[Any]:
    """The arguments for a column: floating-point tensors copied, requiring grad in the
    ``requires_grad=True`` column; under ``inference_mode`` copies are inference tensors
    (made inside the mode, as the thread's benchmark made them)."""
    def prepare(v: Any) -> Any:
        if not isinstance(v, torch.Tensor):
            return v
        copy = v.detach().clone()
        if column == "requires_grad=True" and (copy.is_floating_point() or copy.is_complex()):
            copy.requires_grad_(True)
        return copy

    return [prepare(v) for v in values]


def setting(torch: Any, column: str) -> Any:
    """The context a column's calls run in."""
    return torch.inference_mode() if column == "inference_mode" else contextlib.nullcontext()


def cache_entries(code: Any) -> int | None:
    """How many Dynamo cache entries ``code`` has (None: this torch cannot say)."""
    try:
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError:
        return None
    return len(_debug_get_cache_entry_list(code))


def reset_cache(torch: Any, code: Any) -> None:
    """Empties Dynamo's cache for ``code`` only (the user's other compiled functions
    keep theirs); a torch without ``reset_code`` gets a full ``torch._dynamo.reset()``."""
    reset_code = getattr(torch._C._dynamo.eval_frame, "reset_code", None)
    if reset_code is not None:
        reset_code(code)
    else:
        torch._dynamo.reset()
