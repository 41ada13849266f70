"""A fuzzed sweep run here, one cell after another, and on a 2-worker local cluster.

40 cells of ``x + y`` on fuzzed shapes (``opbench.Fuzzer``: 1-2 dimensions of 16 to
512 elements, float32, a ``y`` that sometimes broadcasts) are measured twice in one
process: by ``opbench.run_all`` sequentially (``executor=None``), and by
``opbench.run_all(executor=...)`` on a Dask ``LocalCluster`` of two worker processes
(one core each, ``resources={"CPU": 1}``), where each measurement holds a core alone,
pinned. Per cell it prints both medians and their ratio (the distributed run's
should agree within 10%: the same code on the same cores); then the wall time of
each sweep and their ratio. The cluster's start (worker processes, their imports)
is timed apart and included in a second ratio.

``--executor processes`` uses opbench's own local pool instead of Dask,
``--executor ray`` a local Ray instance; ``--results PATH`` streams the
distributed run into a sweep file (``--resume`` continues one).

Usage: python benchmarks/sweep.py [--quick] [--executor dask|processes|ray]
                                  [--results PATH [--resume]]
"""
from __future__ import annotations

import argparse
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

    name = {"dask": "Dask LocalCluster(2)", "processes": "opbench processes(2)",
            "ray": "Ray local(2 CPUs)"}[args.executor]
    ratios = [b.median / a.median for a, b in zip(here, there)]
    print(f"{'cell (x + y shapes)':<34} {'sequential us':>13} {'distributed us':>14} "
          f"{'ratio':>6}  within 10%")
    for a, b, r in zip(here, there, ratios):
        print(f"{a.sub_label:<34} {a.median * 1e6:>13.2f} {b.median * 1e6:>14.2f} {r:>6.3f}  "
              f"{'yes' if abs(r - 1) <= 0.10 else 'NO'}")
    within = sum(abs(r - 1) <= 0.10 for r in ratios)
    cores = sorted({tuple(m.info["environment"]["slot"]["cpus"]) for m in there})
    print(f"\ncells within 10%: {within}/{len(ratios)}; median ratio "
          f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
          f"distributed cells measured on cores {cores}")
    print(f"wall: sequential {sequential_s:.2f} s; {name} {distributed_s:.2f} s "
          f"(ratio {distributed_s / sequential_s:.2f}); with the cluster's start "
          f"({startup_s:.2f} s) {(distributed_s + startup_s) / sequential_s:.2f}")


if __name__ == "__main__":
    main()
