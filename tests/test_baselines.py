"""Baselines: numbered runs per machine, the same place for the CLI and the pytest plugin;
concurrent autosaves each keep their run."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import history_repo
from opbench._files import atomic_write_numbered, numbers_taken, remove_numbered
from opbench.core.measurement import Measurement, TaskSpec
from opbench.integrations.pytest_plugin.options import load_args
from opbench.store import baselines
from opbench.store.results import load

# Each process waits for the "go" file, so the eight autosaves start together.
_AUTOSAVE = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from opbench.core.measurement import Measurement, TaskSpec
    from opbench.store import baselines
    root, me = Path(sys.argv[1]), int(sys.argv[2])
    (root / f"ready{me}").touch()
    while not (root / "go").exists():
        time.sleep(0.001)
    m = Measurement(1, [1e-6 * (me + 1)], TaskSpec("f()", "pass", name=f"proc{me}"))
    print(baselines.autosave([m], root=root / "store"))
""")


def test_eight_processes_autosaving_at_once_keep_eight_runs(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", _AUTOSAVE, str(tmp_path), str(i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(8)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready*"))) < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    machine = baselines.machine_id()
    saved = baselines.runs(tmp_path / "store", machine)
    assert sorted(baselines.run_number(p) for p in saved) == list(range(1, 9))
    assert sorted(Path(out.strip()) for out, _ in outputs) == sorted(saved)
    names = sorted(load(p)[0].task_spec.name for p in saved)
    assert names == [f"proc{i}" for i in range(8)]  # every process's own run, none written over
    assert not [p for p in (tmp_path / "store" / machine).iterdir() if p.suffix == ".tmp"]


def test_threads_racing_for_one_number_each_get_their_own(tmp_path: Path) -> None:
    """Every writer starts at number 1: all but one must find it taken and move on."""
    barrier = threading.Barrier(16)
    got: list[tuple[int, Path]] = []

    def write(i: int) -> None:
        barrier.wait()
        got.append(atomic_write_numbered(tmp_path, f"run {i}", lambda n: f"{n:04d}_x.json", 1))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(n for n, _ in got) == list(range(1, 17))
    assert sorted(p.read_text() for _, p in got) == sorted(f"run {i}" for i in range(16))
    assert numbers_taken(tmp_path) == list(range(1, 17))


def test_a_lost_nfs_reply_does_not_skip_or_duplicate(tmp_path: Path, monkeypatch) -> None:
    """On NFS a retried link answers EEXIST although the first attempt made it."""
    real_link = os.link

    def link_then_lose_reply(src, dst, *args, **kwargs):
        real_link(src, dst)
        raise FileExistsError(17, "File exists", str(dst))

    monkeypatch.setattr(os, "link", link_then_lose_reply)
    number, path = atomic_write_numbered(tmp_path, "x", lambda n: f"{n:04d}_a.json", 1)
    assert (number, path.name, path.read_text()) == (1, "0001_a.json", "x")
    assert numbers_taken(tmp_path) == [1]


def test_without_hard_links_an_exclusive_create_claims(tmp_path: Path, monkeypatch) -> None:
    def no_links(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    first = atomic_write_numbered(tmp_path, "a", lambda n: f"{n:04d}.json", 1)
    second = atomic_write_numbered(tmp_path, "b", lambda n: f"{n:04d}.json", 1)
    assert (first[0], second[0]) == (1, 2)
    assert (first[1].read_text(), second[1].read_text()) == ("a", "b")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_remove_numbered_frees_the_registry_link(tmp_path: Path) -> None:
    number, path = atomic_write_numbered(tmp_path, "x", lambda n: f"{n:04d}.json", 1)
    assert os.stat(path).st_nlink == 2  # the registry shares the file's inode
    remove_numbered(path, number)
    assert not path.exists() and numbers_taken(tmp_path) == []


def test_autosave_records_commit_branch_dirty_and_time(tmp_path: Path, monkeypatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q", "-b", "feature"], check=True)
    (repo / "a.txt").write_text("1")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first change"], check=True,
                   env={**os.environ, "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z"})
    subprocess.run([*git, "tag", "v1.0"], check=True)
    (repo / "a.txt").write_text("2")
    monkeypatch.chdir(repo)
    path = baselines.autosave([Measurement(1, [1e-6], TaskSpec("f()", "pass"))],
                              root=tmp_path / "store")
    env = load(path).environment
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert env["git"] == {"commit": head.strip(), "branch": "feature", "dirty": True,
                          "commit_time": "2026-01-02T03:04:05Z", "position": 1,
                          "subject": "first change", "tags": ["v1.0"]}
    assert env["git_commit"] == head.strip() + "+dirty"
    assert env["saved_at"].endswith("Z") and env["machine_id"] == baselines.machine_id()
    assert path.name.startswith("0001_" + head[:12] + "_dirty_")


def test_autosave_outside_git_records_no_commit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    path = baselines.autosave([Measurement(1, [1e-6], TaskSpec("f()", "pass"))],
                              root=tmp_path / "store")
    assert "git" not in load(path).environment and "_nocommit_" in path.name


def test_a_result_that_cannot_be_saved_claims_no_number(tmp_path: Path) -> None:
    bad = Measurement(1, [1e-6], TaskSpec("f()", "pass"))
    bad.raw_times[0] = float("nan")
    with pytest.raises(ValueError, match="finite positive"):
        baselines.autosave([bad], root=tmp_path)
    assert baselines.runs(tmp_path) == []


def test_root_is_the_project_root_from_any_subdirectory(tmp_path, monkeypatch):
    monkeypatch.delenv(baselines.ENV_VAR, raising=False)
    (tmp_path / "pyproject.toml").write_text("")
    sub = tmp_path / "tests" / "deep"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert baselines.root_dir() == tmp_path / ".opbench"
    monkeypatch.setenv(baselines.ENV_VAR, str(tmp_path / "elsewhere"))
    assert baselines.root_dir() == tmp_path / "elsewhere"
    assert baselines.root_dir(tmp_path / "given") == tmp_path / "given"


def test_pytest_autosave_is_what_the_cli_finds_from_a_subdirectory(tmp_path):
    # pytest's rootdir (the ini file's folder) and the CLI's working directory used to
    # give two different .opbench folders: `compare --latest` found nothing.
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_x.py").write_text(textwrap.dedent("""
        def test_x(opbench):
            opbench(lambda: None, min_run_time=0.01, min_samples=2)
    """))
    sub = tmp_path / "sub"
    sub.mkdir()
    env_cmd = [sys.executable, "-m", "pytest", "-q", *load_args(), "-p", "no:cacheprovider",
               "--opbench-autosave", str(tmp_path / "test_x.py")]
    done = subprocess.run(env_cmd, cwd=sub, capture_output=True, text=True, timeout=300,
                          env=_env_without_baseline_dir())
    assert done.returncode == 0, done.stdout + done.stderr
    found = subprocess.run([sys.executable, "-c", "from opbench.store import baselines; "
                            "print(baselines.latest())"], cwd=sub, capture_output=True,
                           text=True, timeout=60, env=_env_without_baseline_dir())
    latest = found.stdout.strip()
    assert latest != "None" and latest.startswith(str(tmp_path / ".opbench")), latest


def _env_without_baseline_dir() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != baselines.ENV_VAR}

RESULT = [Measurement(1, [1e-6], TaskSpec("f()", "pass"))]
ENV = {"platform": "Linux-6.1-x86_64", "machine": "x86_64", "python_implementation": "CPython",
       "python": "3.11.7", "cpu_model": "Zen 4", "cpu_count": 2, "hostname": "runner-17"}


def test_machine_id_ignores_the_host_name_but_not_the_cpu() -> None:
    name = baselines.machine_id(ENV)
    assert name.startswith("Linux-x86_64-CPython3.11-")
    assert baselines.machine_id({**ENV, "hostname": "runner-18"}) == name
    assert baselines.machine_id({**ENV, "cpu_count": 4}) != name
    assert baselines.machine_id({**ENV, "machine": "arm 64/v8"}).split("-")[1] == "arm_64_v8"


def test_runs_are_numbered_in_order_and_latest_is_the_last(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = tmp_path / "checkout"  # a checkout of its own: the tests may run from an sdist
    checkout.mkdir()
    history_repo.git(checkout, "init", "-q")
    (checkout / "f").write_text("x")
    history_repo.git(checkout, "add", "f")
    history_repo.git(checkout, "commit", "-q", "-m", "one")
    monkeypatch.chdir(checkout)
    assert baselines.latest(root=tmp_path) is None and baselines.runs(root=tmp_path) == []
    saved = [baselines.autosave(RESULT, root=tmp_path) for _ in range(3)]
    assert [p.name[:5] for p in saved] == ["0001_", "0002_", "0003_"]
    assert baselines.runs(root=tmp_path) == saved
    assert baselines.latest(root=tmp_path) == saved[-1]
    assert saved[0].parent.name == baselines.machine_id()
    env = load(saved[-1]).environment
    assert env["machine_id"] == baselines.machine_id()
    assert env["git_commit"] == history_repo.git(checkout, "rev-parse", "HEAD")


def test_the_environment_variable_moves_the_root(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(baselines.ENV_VAR, str(tmp_path / "elsewhere"))
    assert baselines.root_dir() == tmp_path / "elsewhere"
    assert baselines.root_dir(tmp_path) == tmp_path
    monkeypatch.delenv(baselines.ENV_VAR)
    assert baselines.root_dir() == baselines.project_root() / ".opbench"


def test_files_that_are_not_numbered_runs_are_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    for name in ("0002_a.json", "0010_b.json", "notes.json", "0003_c.txt"):
        (folder / name).write_text("{}")
    assert [p.name for p in baselines.runs(root=tmp_path, machine="m")] == ["0002_a.json", "0010_b.json"]
