"""torch.compile benchmarks: compile time and eager vs compiled running time, per backend.

The same API and return values as ``torch.utils.benchmark.utils.compile``
(``benchmark_compile`` returns ``(compilation_ms, running_ms)`` rounded to
two decimals, or ``(None, None)`` when compiling fails; ``bench_all`` returns
a GitHub-style table as a string), without needing ``tabulate``. Where torch
2.13 is wrong, opbench is right:

* **Compilation time.** torch times its "first" call with ``Timer.timeit(1)``,
  whose two warm-up calls run (and compile) before the timed one, so torch
  reports a warm call. opbench times the cold first call, the one that
  compiles (``opbench.core.first_call.measure_first_call``).
* **Training.** torch trains only when both ``optimizer`` and ``loss_fn`` are
  given (``bench_all``'s eager row never gets ``loss_fn``, so it times
  inference under a "Training" heading). opbench trains whenever an
  ``optimizer`` is given, with ``loss_fn(output)`` or, without one,
  ``output.sum()``, as torch's own statement intends.
* ``bench_all(..., backends=[...])`` (keyword-only, opbench only) limits the
  sweep; by default it covers ``torch._dynamo.list_backends()`` as torch does.

Beyond torch: ``overheads(fn, *args)`` (``opbench.analysis.compile_overheads``)
measures eager against compiled per call, with and without ``requires_grad``
and under ``inference_mode``, and splits each compiled call by layer (Dynamo,
AOTAutograd, Inductor, kernels).

Example (a backend without code generation, so it takes a second)::

    >>> import torch
    >>> compile_ms, run_ms = benchmark_compile(torch.sin, torch.randn(8), backend="eager")
    >>> compile_ms > 0 and run_ms > 0
    True
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from opbench._checks import check_count
from opbench._text import text_table
from opbench.analysis.compile_overheads import CompileOverheads, import_torch, overheads
from opbench.core.first_call import measure_first_call

__all__ = ["CompileOverheads", "bench_all", "benchmark_compile", "overheads"]

_INFERENCE_STMT = "model(sample_input)"
_TRAINING_STMT = """\
output = model(sample_input)
loss = loss_fn(output) if loss_fn else output.sum()
loss.backward()
optimizer.step()
optimizer.zero_grad()"""

_FIELD_NAMES = ["Train/Inference", "Backend", "Mode", "Compilation Time", "Average Running Time"]

_warned_tensor_cores = False


def _torch() -> Any:
    return import_torch("opbench.analysis.compile benchmarks torch.compile")


def _timer(model: Any, sample_input: Any, optimizer: Any, loss_fn: Any) -> Any:
    from opbench.timer import Timer

    return Timer(
        stmt=_TRAINING_STMT if optimizer is not None else _INFERENCE_STMT,
        globals={"model": model, "sample_input": sample_input, "optimizer": optimizer,
                 "loss_fn": loss_fn},
    )


def _mean_ms(timer: Any, num_iters: int) -> float:
    return round(timer.timeit(number=num_iters).mean * 1000, 2)


def benchmark_compile(
    model: Callable[..., Any],
    sample_input: Any,
    num_iters: int = 5,
    backend: str | None = None,
    mode: str | None = "default",
    optimizer: Any | None = None,
    loss_fn: Callable[..., Any] | None = None,
) -> tuple[float | None, float | None]:
    """Compiles ``model`` with ``backend`` (None: stay eager) and times it.

    Returns:
        ``(compilation_time_ms, running_time_ms)``: the cold first call (which
        compiles) and the mean of ``num_iters`` warm calls, both in
        milliseconds rounded to 2 decimals. Eager gives ``(None, running)``.
        A failed compile, or one that compiles no frame or more than one,
        prints the error and returns ``(None, None)``, as torch does.
    """
    check_count("num_iters", num_iters)
    torch = _torch()
    if not backend:
        return None, _mean_ms(_timer(model, sample_input, optimizer, loss_fn), num_iters)

    from torch._dynamo.testing import CompileCounterWithBackend

    try:
        torch._dynamo.reset()
        counter = CompileCounterWithBackend(backend)
        compiled = torch.compile(model, backend=counter, mode=mode)
        timer = _timer(compiled, sample_input, optimizer, loss_fn)
        compilation_ms = round(measure_first_call(timer) * 1000, 2)
        running_ms = _mean_ms(timer, num_iters)
        if counter.frame_count == 0:
            raise RuntimeError("No compilation occurred during benchmarking.")
        if counter.frame_count > 1:
            raise RuntimeError("Recompilation occurred during benchmarking.")
    except Exception as e:
        print(e)
        print(f"Failed to compile {backend} with mode {mode}")
        return None, None
    return compilation_ms or None, running_ms or None


def _enable_tensor_cores(torch: Any) -> bool:
    """Lets float32 matmuls use TF32 on GPUs that have tensor cores, as torch's bench_all
    does; True when it changed the setting (so the caller restores it)."""
    global _warned_tensor_cores
    if not (torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)
            and not torch.backends.cuda.matmul.allow_tf32):
        return False
    torch.set_float32_matmul_precision("high")
    if not _warned_tensor_cores:
        print("Your GPU supports tensor cores")
        print("we will enable it automatically by setting "
              "`torch.set_float32_matmul_precision('high')`")
        _warned_tensor_cores = True
    return True


def _ms(value: float | None) -> str:
    return f"{value} ms" if value else "-"


def bench_all(
    model: Callable[..., Any],
    sample_input: Any,
    num_iters: int = 5,
    optimizer: Any | None = None,
    loss_fn: Callable[..., Any] | None = None,
    *,
    backends: Sequence[str] | None = None,
) -> str:
    """Eager, then every backend (every inductor mode), as a GitHub-style table.

    A row per backend (and per inductor mode): compile time (cold first
    call) and mean running time; a backend that fails to compile is
    reported and left out, except inductor modes, which show "-".
    Training with an ``optimizer``, inference otherwise.

    Args:
        backends: the backends to try (opbench only; default
            ``torch._dynamo.list_backends()``).
    """
    torch = _torch()
    kind = "Training" if optimizer is not None else "Inference"
    torch._dynamo.reset()
    _, eager_ms = benchmark_compile(model, sample_input, num_iters, None, None, optimizer, loss_fn)
    rows = [[kind, "Eager", "-", "-", _ms(eager_ms)]]

    for backend in torch._dynamo.list_backends() if backends is None else backends:
        if backend != "inductor":
            compile_ms, run_ms = benchmark_compile(
                model, sample_input, num_iters, backend, None, optimizer, loss_fn)
            if run_ms is not None:
                rows.append([kind, backend, "-", _ms(compile_ms), _ms(run_ms)])
            continue
        modes: list[str | None] = [m for m in torch._inductor.list_mode_options() if m != "default"]
        for mode in [*modes, None]:
            precision = torch.get_float32_matmul_precision()
            changed = _enable_tensor_cores(torch)
            try:
                compile_ms, run_ms = benchmark_compile(
                    model, sample_input, num_iters, backend, mode, optimizer, loss_fn)
            finally:
                if changed:
                    torch.set_float32_matmul_precision(precision)
            rows.append([kind, backend, mode or "-", _ms(compile_ms), _ms(run_ms)])
    return text_table(_FIELD_NAMES, rows)
