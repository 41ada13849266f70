"""run_all on a real Ray cluster: a local Ray instance with two CPUs started by the test.

(Ray's "local mode", which ran tasks in the driver, is gone from Ray 2.x releases
this new: ``ray.init(local_mode=True)`` raises. A local instance runs real worker
processes, which is what a sweep needs tested anyway.)
"""
from __future__ import annotations

import os
import socket

import pytest

import opbench
from opbench.errors import PlacementError, SchedulerUnreachableError, SweepError
from sweep_faults import die_once

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'opbench[ray]')")

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    saved = os.environ.get("OPBENCH_SLOT_DIR")
    os.environ["OPBENCH_SLOT_DIR"] = str(tmp_path_factory.mktemp("slots"))
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 * 2**20,
             log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()
    if saved is None:
        del os.environ["OPBENCH_SLOT_DIR"]
    else:
        os.environ["OPBENCH_SLOT_DIR"] = saved


def _ok(i):
    return opbench.Timer("sum(range(100))", label="sum", sub_label=str(i))


@pytest.mark.slow
def test_a_sweep_on_ray_with_every_fault(ray_cluster, tmp_path):
    marker = str(tmp_path / "died")
    timers = [_ok(0), opbench.Timer(lambda: os._exit(5), label="killer"),
              opbench.Timer("1 / 0", label="bad"), opbench.Timer(die_once(marker), label="flaky"), _ok(4)]
    path = tmp_path / "sweep.jsonl"
    with pytest.raises(SweepError, match="2 of 5 tasks failed") as info:
        opbench.run_all(timers, "timeit", executor="ray", progress=False, results_path=path,
                        number=20)
    failures = {f.index: f for f in info.value.failures}
    assert sorted(failures) == [1, 2]
    assert failures[1].attempts == 2 and "Ray worker died" in failures[1].error
    assert failures[2].error == "ZeroDivisionError: division by zero"
    results = info.value.results
    assert [r.label for r in results if r is not None] == ["sum", "flaky", "sum"]
    for m in (results[0], results[3], results[4]):
        env = m.info["environment"]
        assert m.env == HOST and env["slot"]["pinned"] and len(env["slot"]["cpus"]) == 1
    assert len(opbench.load(path)) == 3

    # Resume runs only the failed ones again.
    with pytest.raises(SweepError) as again:
        opbench.run_all(timers, "timeit", executor="ray", progress=False, results_path=path,
                        resume=True, number=20)
    assert sorted(f.index for f in again.value.failures) == [1, 2]
    assert [r.raw_times for r in again.value.results if r is not None] == [
        r.raw_times for r in results if r is not None]


@pytest.mark.slow
def test_ray_refuses_what_no_node_can_hold(ray_cluster):
    with pytest.raises(PlacementError, match="3 core"):
        opbench.run_all([opbench.Timer("pass", num_threads=3)], "timeit", executor="ray",
                        number=1)


def test_an_unreachable_ray_address_is_named(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with pytest.raises(SchedulerUnreachableError, match=f"no Ray cluster reachable at "
                                                        f"ray://127.0.0.1:{port}"):
        opbench.run_all([_ok(0)], "timeit", executor=f"ray://127.0.0.1:{port}", number=1)
