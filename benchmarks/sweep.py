"""A fuzzed sweep run here, one cell after another, and on a 2-worker local cluster.

40 cells of ``x + y`` on fuzzed shapes (``opbench.Fuzzer``: 1-2 dimensions of 16 to
512 elements, float32, a ``y`` that sometimes broadcasts) are measured twice in one
process: by ``opbench.run_all`` sequentially (``executor=None``), and by
``opbench.run_all(executor=...)`` on a Dask ``LocalCluster`` of two worker processes
(one core each, ``resources={"CPU": 1}``), where each measurement holds a core alone,
pinned. Two controls say where a difference comes from: the same executor with
one worker (no two measurements at once), and the sequential sweep again at the
end (how well two sequential runs agree is this machine's noise floor). Per cell it prints the
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


def start_cluster(kind: str, workers: int) -> tuple[Any, Any]:
    """The executor argument for run_all, and what to close afterwards."""
    if kind == "processes":  # opbench's pool: one worker per core, not configurable
        return "processes", None
    if kind == "ray":
        import ray

        ray.init(num_cpus=workers, include_dashboard=False, object_store_memory=200 * 2**20,
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
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
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


def distributed_run(kind: str, workers: int, timers: list[opbench.Timer], min_run_time: float,
                    args: argparse.Namespace) -> tuple[list[Any], float, float]:
    """The results, the sweep's wall time and the cluster's start time."""
    start = time.perf_counter()
    executor, handle = start_cluster(kind, workers)
    startup_s = time.perf_counter() - start
    try:
        start = time.perf_counter()
        results = opbench.run_all(timers, executor=executor, results_path=args.results,
                                  resume=args.resume, min_run_time=min_run_time)
        return results, time.perf_counter() - start, startup_s
    finally:
        close_cluster(kind, handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 cells, short measurements")
    parser.add_argument("--executor", choices=("dask", "processes", "ray"), default="dask")
    parser.add_argument("--results", help="stream the 2-worker run into this sweep file")
    parser.add_argument("--resume", action="store_true", help="continue --results' file")
    args = parser.parse_args()
    cells, min_run_time = (4, 0.02) if args.quick else (40, 0.2)
    warnings.simplefilter("ignore", opbench.BenchmarkWarning)
    torch.set_num_threads(1)
    timers = fuzzed_timers(cells)
    name = {"dask": "Dask LocalCluster(2)", "processes": "opbench processes(2)",
            "ray": "Ray local(2 CPUs)"}[args.executor]

    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    here = opbench.run_all(timers, min_run_time=min_run_time)
    sequential_s = time.perf_counter() - start
    there, distributed_s, startup_s = distributed_run(args.executor, 2, timers, min_run_time,
                                                      args)
    # The same executor with one worker: no two measurements at once. Where it agrees
    # with the sequential run and two workers do not, the difference is the machine's
    # (two measurements at once on its two cores), not the executor's.
    alone = None
    if args.executor != "processes":
        quiet = argparse.Namespace(results=None, resume=False)
        alone = distributed_run(args.executor, 1, timers, min_run_time, quiet)[0]
    again = opbench.run_all(timers, min_run_time=min_run_time)
    load_after = os.getloadavg()[0]

    columns = [("dist", there), ("1 worker", alone), ("seq2", again)]
    columns = [(label, runs) for label, runs in columns if runs is not None]
    ratios = {label: [b.median / a.median for a, b in zip(here, runs)] for label, runs in columns}
    print(f"{'cell (x + y shapes)':<31}{'seq us':>8}"
          + "".join(f"{label + ' us':>13}" for label, _ in columns)
          + "".join(f"{label + '/seq':>13}" for label, _ in columns))
    for i, a in enumerate(here):
        print(f"{a.sub_label:<31}{a.median * 1e6:>8.2f}"
              + "".join(f"{runs[i].median * 1e6:>13.2f}" for _, runs in columns)
              + "".join(f"{ratios[label][i]:>13.3f}" for label, _ in columns))
    print("\ncells within 10% of the sequential run (median ratio):")
    for label, _ in columns:
        what = {"dist": f"{name}", "1 worker": f"{name.split('(')[0].strip()} with 1 worker",
                "seq2": "sequential again (the noise floor)"}[label]
        print(f"  {what:<40} {_within(ratios[label])}/{len(here)}  "
              f"({statistics.median(ratios[label]):.3f})")
    cores = sorted({tuple(m.info["environment"]["slot"]["cpus"]) for m in there})
    print(f"2-worker cells measured pinned to cores {cores}")
    print(f"wall: sequential {sequential_s:.2f} s; {name} {distributed_s:.2f} s "
          f"(ratio {distributed_s / sequential_s:.2f}); with the cluster's start "
          f"({startup_s:.2f} s) {(distributed_s + startup_s) / sequential_s:.2f}")
    print(f"load average: {load_before:.1f} before, {load_after:.1f} after, on "
          f"{os.cpu_count()} cores")


def _within(ratios: list[float]) -> int:
    return sum(abs(r - 1) <= 0.10 for r in ratios)


if __name__ == "__main__":
    main()
