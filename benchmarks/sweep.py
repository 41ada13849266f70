"""A fuzzed sweep run here, one cell after another, and on a 2-worker local cluster.

40 cells of ``x + y`` on fuzzed shapes (``opbench.Fuzzer``: 1-2 dimensions of 16 to
512 elements, float32, a ``y`` that sometimes broadcasts) are measured twice in one
process: by ``opbench.run_all`` sequentially (``executor=None``), and by
``opbench.run_all(executor=...)`` on a Dask ``LocalCluster`` of two worker processes
(one core each, ``resources={"CPU": 1}``), where each measurement holds a core alone,
pinned. The sequential sweep runs again after the distributed one: how well two
sequential runs agree is this machine's noise floor. Per cell it prints the
medians and their ratios (the distributed run's should agree within 10%: the same
code on the same cores); then the wall time of each sweep and their ratio. The
cluster's start (worker processes, their imports) is timed apart and included in
a second ratio. The load average before and after says how busy the machine was.

``--executor processes`` uses opbench's own local pool instead of Dask,
``--executor ray`` a local Ray instance; ``--results PATH`` streams the
distributed run into a sweep file (``--resume`` continues one).

Usage: python benchmarks/sweep.py [--quick] [--executor dask|processes|ray]
                                  [--results PATH [--resume]]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from typing import Any

import torch

import opbench
from opbench import FuzzedParameter, FuzzedTensor, Fuzzer, ParameterAlias


def fuzzed_timers(cells: int) -> list[opbench.Timer]:
    fuzzer = Fuzzer(
        parameters=[
            FuzzedParameter("dim", distribution={1: 0.4, 2: 0.6}),
            FuzzedParameter("k0", minval=16, maxval=512, distribution="loguniform"),
            FuzzedParameter("k1", minval=16, maxval=512, distribution="loguniform"),
            FuzzedParameter("y_k1", distribution={ParameterAlias("k1"): 0.8, 1: 0.2}),
        ],
        tensors=[FuzzedTensor("x", size=("k0", "k1"), dim_parameter="dim", probability_contiguous=1),
                 FuzzedTensor("y", size=("k0", "y_k1"), dim_parameter="dim",
                              probability_contiguous=1)],
        seed=17,
    )
    timers = []
    for i, (tensors, _, _) in enumerate(fuzzer.take(cells)):
        shapes = " + ".join(str(list(t.shape)) for t in tensors.values())
        timers.append(opbench.Timer("x + y", globals=tensors, label="fuzzed x + y",
                                    sub_label=f"{i:2d}: {shapes}", description="add"))
    return timers


def start_cluster(kind: str) -> tuple[Any, Any]:
    """The executor argument for run_all, and what to close afterwards."""
    if kind == "processes":
        return "processes", None
    if kind == "ray":
        import ray

        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 * 2**20,
                 log_to_driver=False, configure_logging=False)
        return "ray", ray
    import dask
    from distributed import Client, LocalCluster

    # Workers in this process's environment: Dask's nanny would otherwise give them
    # its own (MALLOC_TRIM_THRESHOLD_=65536 and one-thread OpenMP/MKL/OpenBLAS), and the
    # first makes every allocation above 64 KiB slower (opbench warns about it).
    unset = {f"distributed.nanny.pre-spawn-environ.{name}": None for name in
             dask.config.get("distributed.nanny.pre-spawn-environ")}
    with dask.config.set(unset):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               resources={"CPU": 1}, dashboard_address=":0")
    client = Client(cluster)
    # The workers import torch on their first task; do it now, with the start.
    client.run(lambda: __import__("torch"))
    return client, (client, cluster)


def close_cluster(kind: str, handle: Any) -> None:
    if kind == "ray":
        handle.shutdown()
    elif handle is not None:
        for part in handle:
            part.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 cells, short measurements")
    parser.add_argument("--executor", choices=("dask", "processes", "ray"), default="dask")
    parser.add_argument("--results", help="stream the distributed run into this sweep file")
    parser.add_argument("--resume", action="store_true", help="continue --results' file")
    args = parser.parse_args()
    cells, min_run_time = (4, 0.02) if args.quick else (40, 0.2)
    warnings.simplefilter("ignore", opbench.BenchmarkWarning)
    torch.set_num_threads(1)
    timers = fuzzed_timers(cells)

    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    here = opbench.run_all(timers, min_run_time=min_run_time)
    sequential_s = time.perf_counter() - start

    start = time.perf_counter()
    executor, handle = start_cluster(args.executor)
    startup_s = time.perf_counter() - start
    try:
        start = time.perf_counter()
        there = opbench.run_all(timers, executor=executor, results_path=args.results,
                                resume=args.resume, min_run_time=min_run_time)
        distributed_s = time.perf_counter() - start
    finally:
        close_cluster(args.executor, handle)
    again = opbench.run_all(timers, min_run_time=min_run_time)
    load_after = os.getloadavg()[0]

    name = {"dask": "Dask LocalCluster(2)", "processes": "opbench processes(2)",
            "ray": "Ray local(2 CPUs)"}[args.executor]
    ratios = [b.median / a.median for a, b in zip(here, there)]
    floor = [c.median / a.median for a, c in zip(here, again)]
    print(f"{'cell (x + y shapes)':<34} {'seq us':>8} {'dist us':>8} {'seq2 us':>8} "
          f"{'dist/seq':>8} {'seq2/seq':>8}")
    for a, b, c, r, f in zip(here, there, again, ratios, floor):
        print(f"{a.sub_label:<34} {a.median * 1e6:>8.2f} {b.median * 1e6:>8.2f} "
              f"{c.median * 1e6:>8.2f} {r:>8.3f} {f:>8.3f}")
    cores = sorted({tuple(m.info["environment"]["slot"]["cpus"]) for m in there})
    print(f"\ncells within 10%: distributed vs sequential {_within(ratios)}/{len(ratios)} "
          f"(median ratio {statistics.median(ratios):.3f}); second sequential vs first "
          f"{_within(floor)}/{len(floor)} (median ratio {statistics.median(floor):.3f}), "
          f"the noise floor; distributed cells measured pinned to cores {cores}")
    print(f"wall: sequential {sequential_s:.2f} s; {name} {distributed_s:.2f} s "
          f"(ratio {distributed_s / sequential_s:.2f}); with the cluster's start "
          f"({startup_s:.2f} s) {(distributed_s + startup_s) / sequential_s:.2f}")
    print(f"load average: {load_before:.1f} before, {load_after:.1f} after, on "
          f"{os.cpu_count()} cores")


def _within(ratios: list[float]) -> int:
    return sum(abs(r - 1) <= 0.10 for r in ratios)


if __name__ == "__main__":
    main()
