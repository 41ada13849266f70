"""run_all on a real Dask cluster: a LocalCluster of two worker processes on this machine."""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest

import opbench
from opbench.errors import PlacementError, SchedulerUnreachableError, SweepError
from opbench.sweep import executors
from sweep_faults import die_once

distributed = pytest.importorskip("distributed", reason="Dask's distributed is not installed "
                                  "(pip install 'opbench[dask]')")
dask = pytest.importorskip("dask")

HOST = socket.gethostname()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    # The workers inherit this at start: core locks of these tests alone.
    saved = os.environ.get("OPBENCH_SLOT_DIR")
    os.environ["OPBENCH_SLOT_DIR"] = str(tmp_path_factory.mktemp("slots"))
    # A worker death fails its task at once (Dask's default retries it 3 more
    # times first), so opbench's one retry is the only one.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           resources={"CPU": 1}, dashboard_address=":0")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()
    if saved is None:
        del os.environ["OPBENCH_SLOT_DIR"]
    else:
        os.environ["OPBENCH_SLOT_DIR"] = saved


@pytest.fixture(autouse=True)
def _both_workers_up(request):
    # A test that kills a worker leaves its nanny restarting it.
    if "client" in request.fixturenames:
        request.getfixturevalue("client").wait_for_workers(2, timeout=60)


def _ok(i):
    return opbench.Timer("sum(range(100))", label="sum", sub_label=str(i))


def test_results_come_back_in_order_from_pinned_slots_of_the_workers(client, tmp_path):
    workers = set(client.scheduler_info()["workers"])
    path = tmp_path / "sweep.jsonl"
    queued, done = [], threading.Event()

    def watch():  # how many tasks each worker holds, while the sweep runs
        while not done.is_set():
            queued.append(max((len(keys) for keys in client.processing().values()), default=0))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    timers = [opbench.Timer("time.sleep(0.01)", setup="import time", label="sleep",
                            sub_label=str(i)) for i in range(6)]
    try:
        with pytest.warns(opbench.MachineWarning, match="MALLOC_TRIM_THRESHOLD_=65536"):
            results = opbench.run_all(timers, "timeit", executor=client, progress=False,
                                      results_path=path, number=10)
    finally:
        done.set()
        watcher.join()
    # One task per worker (its one CPU) at a time: nothing waits in a worker's queue,
    # where a worker's death would take it down too.
    assert max(queued) == 1
    assert [m.sub_label for m in results] == [str(i) for i in range(6)]
    for m in results:
        env = m.info["environment"]
        assert m.env == HOST and env["hostname"] == HOST
        assert env["slot"]["pinned"] and len(env["slot"]["cpus"]) == 1
        assert env["worker"] != f"{HOST}:{os.getpid()}"  # measured in a worker process
        # Dask's nanny gives its workers an allocator setting of their own: kept, and
        # flagged on each result (in the file too).
        assert env["variables"]["MALLOC_TRIM_THRESHOLD_"] == "65536"
        assert any("MALLOC_TRIM_THRESHOLD_=65536 (here unset)" in w["message"]
                   for w in m.info["warnings"])
    assert set(client.scheduler_info()["workers"]) == workers
    assert [m.raw_times for m in opbench.load(path)] == [m.raw_times for m in results]


def test_faults_a_raising_task_and_a_worker_killer_leave_the_rest_measured(client):
    timers = [_ok(0), opbench.Timer(lambda: os._exit(5), label="killer"),
              opbench.Timer("1 / 0", label="bad"), _ok(3), _ok(4)]
    with pytest.raises(SweepError, match="2 of 5 tasks failed") as info:
        opbench.run_all(timers, "timeit", executor=client, progress=False, number=20)
    by_index = {f.index: f for f in info.value.failures}
    assert sorted(by_index) == [1, 2]  # no innocent task went down with the killer
    assert by_index[1].attempts == 2 and "Dask worker" in by_index[1].error
    assert "died running it" in by_index[1].error
    assert by_index[2].error == "ZeroDivisionError: division by zero"
    assert [r.sub_label for r in info.value.results if r is not None] == ["0", "3", "4"]


def test_a_task_whose_worker_died_once_succeeds_on_the_retry(client, tmp_path):
    marker = str(tmp_path / "died")
    (m,) = opbench.run_all([opbench.Timer(die_once(marker), label="flaky")], "timeit",
                           executor=client, progress=False, number=10)
    assert os.path.exists(marker) and m.label == "flaky"


def test_a_cluster_without_slot_resources_is_refused_before_submitting(tmp_path):
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as bare:
        with pytest.raises(PlacementError, match=r"--resources CPU=1"):
            opbench.run_all([_ok(0)], "timeit", executor=bare, progress=False, number=1)
        assert not bare.who_has()  # nothing was submitted


def test_a_closed_client_and_an_unreachable_scheduler_name_the_address(monkeypatch):
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=":0",
                                  resources={"CPU": 1}) as cluster:
        c = distributed.Client(cluster)
        address = cluster.scheduler_address
        c.close()
        with pytest.raises(SchedulerUnreachableError, match=address):
            opbench.run_all([_ok(0)], "timeit", executor=c, progress=False, number=1)
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(executors.base, "CONNECT_TIMEOUT_S", 2.0)
    with pytest.raises(SchedulerUnreachableError,
                       match=f"no Dask scheduler reachable at tcp://127.0.0.1:{port}"):
        opbench.run_all([_ok(0)], "timeit", executor=f"tcp://127.0.0.1:{port}", number=1)


def test_a_scheduler_address_connects_and_closes_its_own_client(client):
    address = client.scheduler.address
    (m,) = opbench.run_all([_ok(0)], "timeit", executor=address, progress=False, number=10)
    assert m.number_per_run == 10
    assert len(client.scheduler_info()["workers"]) == 2
