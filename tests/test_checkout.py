"""opbench.revisions (checkout, build, command, git): a command run at a git revision, on a
real repository made here."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from conftest import PYTEST_PLUGIN_ARGS
from opbench.errors import Error, UntrustedPathError
from opbench.revisions import RevisionError, build
from opbench.revisions.checkout import _WORKTREE_PREFIX, checkout, run_at, working_tree
from opbench.revisions.command import RESULTS_ENV, Run
from opbench.revisions.git import resolve
from opbench.revisions.layout import LAYOUT_ENV, PAGE

# Saves one result whose time is mylib.COST: what each side of an A/B saves.
SCRIPT = textwrap.dedent(f"""
    import os, mylib
    from opbench import Measurement, TaskSpec
    from opbench.store.results import save
    m = Measurement(1, [mylib.COST] * 3, TaskSpec("f()", "pass", name="f"))
    save([m], os.environ[{RESULTS_ENV!r}])
""")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """Two commits: mylib.COST 1e-3, then 2e-3; a script that saves it."""
    root = tmp_path / "proj"
    (root / "src" / "mylib").mkdir(parents=True)
    git(root, "init", "-q")
    (root / ".gitignore").write_text("*.so\n")
    (root / "src" / "mylib" / "__init__.py").write_text("COST = 1e-3\n")
    (root / "bench.py").write_text(SCRIPT)
    git(root, "add", ".")
    git(root, "commit", "-qm", "fast")
    (root / "src" / "mylib" / "__init__.py").write_text("COST = 2e-3\n")
    git(root, "commit", "-qam", "slow")
    return root


def worktrees(repo: Path) -> list[str]:
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


def cost(run: Run) -> float:
    from opbench.store.results import load

    assert run.ok, run.problem
    assert run.results is not None
    return float(load(run.results)[0].median)


def test_resolve_and_bad_revisions(repo: Path, tmp_path: Path) -> None:
    assert resolve("HEAD~1", repo) == git(repo, "rev-parse", "HEAD~1")
    with pytest.raises(RevisionError, match="names no commit"):
        resolve("no-such-branch", repo)
    with pytest.raises(RevisionError, match="not inside a git repository"):
        resolve("HEAD", tmp_path)
    assert issubclass(RevisionError, Error)


def test_each_revision_imports_its_own_code(repo: Path) -> None:
    old = run_at("HEAD~1", [sys.executable, "bench.py"], repo=repo)
    new = run_at("HEAD", [sys.executable, "bench.py"], repo=repo)
    assert (cost(old), cost(new)) == (1e-3, 2e-3)
    assert old.commit == git(repo, "rev-parse", "HEAD~1")
    assert worktrees(repo) == [f"worktree {repo}"]  # both removed


def test_working_tree_includes_uncommitted_edits(repo: Path) -> None:
    (repo / "src" / "mylib" / "__init__.py").write_text("COST = 3e-3\n")
    with working_tree(repo) as here:
        assert here.commit == git(repo, "rev-parse", "HEAD") + "+dirty"
        assert here.path == repo
        assert cost(here.run([sys.executable, "bench.py"])) == 3e-3
    assert (repo / "bench.py").exists()  # closing the working tree removes nothing


def test_a_failed_run_is_a_run_not_an_exception(repo: Path, tmp_path: Path) -> None:
    with checkout("HEAD", repo) as c:
        failed = c.run([sys.executable, "-c", "print('boom'); raise SystemExit(3)"])
        silent = c.run([sys.executable, "-c", "pass"])
    assert (failed.returncode, failed.ok, failed.results) == (3, False, None)
    assert "exited with status 3" in failed.problem and "boom" in failed.problem
    assert silent.returncode == 0 and not silent.ok and "saved no results" in silent.problem


def test_a_missing_program_is_a_failed_run_and_relative_programs_are_the_callers(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = run_at("HEAD", ["no-such-program-xyz"], repo=repo)
    assert run.returncode == 127 and "cannot run 'no-such-program-xyz'" in run.problem
    tool = tmp_path / "bin" / "tool.py"
    tool.parent.mkdir()
    tool.write_text("print('mine')\n")
    monkeypatch.chdir(tmp_path)  # ./bin/tool.py exists here, not in the checkout
    with checkout("HEAD", repo) as c:
        done = c.run([sys.executable, "-c", "import sys, runpy; runpy.run_path(sys.argv[1])",
                      str(tool)])
        relative = c.run([os.path.join("bin", "tool.py")])  # not executable: a failed run
    assert done.output.strip() == "mine"
    assert relative.returncode == 127 and str(tool) in relative.output


def test_each_run_gets_a_layout_pad_of_its_own_unless_the_user_fixed_one(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LAYOUT_ENV, raising=False)
    show = [sys.executable, "-c", f"import os; print(len(os.environ[{LAYOUT_ENV!r}]))"]
    with checkout("HEAD", repo) as c:
        lengths = [int(c.run(show).output) for _ in range(4)]
        drawn = {len(c.environment()[LAYOUT_ENV]) for _ in range(50)}
        monkeypatch.setenv(LAYOUT_ENV, "fixed")
        fixed = c.run(show).output, c.environment()[LAYOUT_ENV]
    # Four draws from range(4096) all equal: a chance of one in 4096**3.
    assert len(set(lengths)) > 1 and all(0 <= n < PAGE for n in lengths)
    assert len(drawn) > 25 and max(drawn) < PAGE
    assert fixed == ("5\n", "fixed")


def test_a_stale_results_file_is_not_taken_for_the_runs(repo: Path, tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    path.write_text("{}")
    run = run_at("HEAD", [sys.executable, "-c", "pass"], repo=repo, results_file=path)
    assert run.results is None and not path.exists()


def test_timeout_stops_the_command(repo: Path) -> None:
    start = time.monotonic()
    run = run_at("HEAD", [sys.executable, "-c", "import time; time.sleep(60)"],
                          repo=repo, timeout=1)
    assert not run.ok and run.returncode != 0 and "timeout" in run.output
    assert time.monotonic() - start < 30


def test_commands_run_in_the_callers_subfolder(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo / "src")
    with checkout("HEAD~1") as c:
        run = c.run([sys.executable, "-c", "import os; print(os.getcwd())"])
    assert run.output.strip() == str(c.path / "src")


def test_pytest_runs_save_through_the_plugin(repo: Path) -> None:
    (repo / "test_b.py").write_text(textwrap.dedent("""
        import mylib
        def test_b(opbench):
            opbench("x = 1", min_run_time=0.001, min_samples=2)
    """))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "bench")
    run = run_at("HEAD", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                   *PYTEST_PLUGIN_ARGS, "test_b.py"], repo=repo)
    assert run.command[-1].startswith("--opbench-save=")
    assert run.ok, run.output
    from opbench.store.results import load

    assert [m.task_spec.key for m in load(run.results)] == ["test_b.py::test_b"]  # type: ignore[arg-type]


def test_prepare_runs_once_and_its_failure_is_named(repo: Path) -> None:
    with checkout("HEAD", repo, prepare=[sys.executable, "-c",
                                                 "open('made.txt', 'w').write('x')"]) as c:
        assert (c.path / "made.txt").read_text() == "x"
    with pytest.raises(RevisionError, match=r"prepare command .* failed"):
        checkout("HEAD", repo, prepare=[sys.executable, "-c", "raise SystemExit(1)"])
    assert worktrees(repo) == [f"worktree {repo}"]


def test_extension_modules_copied_when_native_sources_match(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    so = repo / "src" / "mylib" / "_native.so"
    so.write_bytes(b"built")
    built: list[str] = []
    monkeypatch.setattr(build, "_build_extensions",
                        lambda tree, modules, key: built.append(key))
    with checkout("HEAD~1", repo) as c:
        assert (c.path / "src" / "mylib" / "_native.so").read_bytes() == b"built"
    assert built == []
    # A native source that differs between the revision and the working tree: a build.
    (repo / "src" / "mylib" / "core.cpp").write_text("int f() { return 1; }\n")
    git(repo, "add", "src/mylib/core.cpp")
    with checkout("HEAD~1", repo) as c:
        assert not (c.path / "src" / "mylib" / "_native.so").exists()
    assert len(built) == 1


def test_source_roots_follow_the_project_layout(tmp_path: Path) -> None:
    (tmp_path / "python" / "pkg").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.scikit-build]\nwheel.packages = ["python/pkg"]\n')
    assert build.source_roots(tmp_path) == [tmp_path / "python", tmp_path]


def test_ctrl_c_stops_the_command_and_removes_the_worktree(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    driver = textwrap.dedent(f"""
        import sys
        from opbench.revisions.checkout import run_at
        from opbench.revisions.command import sigterm_as_interrupt
        with sigterm_as_interrupt():
            try:
                run_at("HEAD", [sys.executable, "-c",
                    "import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(120)"],
                    repo={str(repo)!r})
            except KeyboardInterrupt:
                print("interrupted")
    """)
    proc = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    deadline = time.monotonic() + 60
    # A driver that died (an import error) never writes the marker: stop waiting then.
    while not (marker.exists() and marker.read_text()) and proc.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate(timeout=60)[0]
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert "interrupted" in out
    assert worktrees(repo) == [f"worktree {repo}"]
    pid = int(marker.read_text())
    with pytest.raises(ProcessLookupError):  # the command was stopped, not left behind
        os.kill(pid, 0)


@pytest.mark.slow  # builds a C extension (setup.py build_ext, pip wheel)
def test_changed_native_sources_are_built_once_and_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A revision whose C source differs from the working tree's is built (pip wheel), and
    the built module is cached by its sources: the second checkout builds nothing."""
    root = tmp_path / "cproj"
    (root / "cpkg").mkdir(parents=True)
    git(root, "init", "-q")
    (root / ".gitignore").write_text("*.so\nbuild/\n*.egg-info/\n")
    (root / "cpkg" / "__init__.py").write_text("from cpkg._v import value\n")
    (root / "setup.py").write_text(textwrap.dedent("""
        from setuptools import Extension, setup
        setup(name="cpkg", version="0", packages=["cpkg"],
              ext_modules=[Extension("cpkg._v", ["cpkg/v.c"])])
    """))
    c_source = textwrap.dedent("""
        #include <Python.h>
        static PyObject *value(PyObject *s, PyObject *a) { return PyLong_FromLong(VALUE); }
        static PyMethodDef m[] = {{"value", value, METH_NOARGS, ""}, {0}};
        static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "_v", 0, -1, m};
        PyMODINIT_FUNC PyInit__v(void) { return PyModule_Create(&d); }
    """)
    (root / "cpkg" / "v.c").write_text("#define VALUE 1\n" + c_source)
    git(root, "add", ".")
    git(root, "commit", "-qm", "one")
    (root / "cpkg" / "v.c").write_text("#define VALUE 2\n" + c_source)
    git(root, "commit", "-qam", "two")
    # The working tree's own build (what tools/build-dev does for opbench).
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=root,
                   check=True, capture_output=True)
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "cache"))
    probe = [sys.executable, "-c", "import cpkg; print(cpkg.value())"]
    first = run_at("HEAD~1", probe, repo=root)
    assert first.output.strip() == "1", first.output
    assert len(list((tmp_path / "cache" / "builds").iterdir())) == 1
    monkeypatch.setattr(subprocess, "run", _no_pip(subprocess.run))
    again = run_at("HEAD~1", probe, repo=root)
    assert again.output.strip() == "1"
    assert run_at("HEAD", probe, repo=root).output.strip() == "2"  # copied, not built


def _no_pip(run):  # type: ignore[no-untyped-def]
    def guarded(args, *a, **k):  # type: ignore[no-untyped-def]
        assert "wheel" not in args, "built again: the cache was not used"
        return run(args, *a, **k)
    return guarded


def test_a_users_worktree_whose_folder_is_away_keeps_its_record_and_staged_changes(
        repo: Path, tmp_path: Path) -> None:
    """Issue 34: only opbench's own worktrees are cleaned up (by path); a worktree of the
    user's whose folder is missing for a while (an unmounted disk) is not pruned."""
    mine = tmp_path / "mine"
    git(repo, "worktree", "add", "-q", "--detach", str(mine))
    (mine / "staged.txt").write_text("keep me\n")
    git(mine, "add", "staged.txt")
    away = tmp_path / "unmounted"
    mine.rename(away)
    # A worktree of an opbench run that was killed, its folder since cleaned away.
    stale = tmp_path / f"{_WORKTREE_PREFIX}0123456789-x"
    git(repo, "worktree", "add", "-q", "--detach", str(stale))
    subprocess.run(["rm", "-rf", str(stale)], check=True)
    with checkout("HEAD~1", repo) as c:
        assert c.run([sys.executable, "-c", "pass"]).returncode == 0
    run_at("HEAD", [sys.executable, "-c", "pass"], repo=repo)
    away.rename(mine)
    assert git(mine, "status", "--porcelain") == "A  staged.txt"  # still a worktree, staged
    assert worktrees(repo) == [f"worktree {repo}", f"worktree {mine}"]  # opbench's stale one gone


def _fake_pip_wheel(monkeypatch: pytest.MonkeyPatch, content: bytes) -> list[list[str]]:
    """``pip wheel`` replaced by one that writes a wheel holding ``pkg/_m.so``."""
    import zipfile

    calls: list[list[str]] = []
    real = subprocess.run

    def run(args, *a, **k):  # type: ignore[no-untyped-def]
        if "wheel" not in args:
            return real(args, *a, **k)
        calls.append(list(args))
        out = Path(args[args.index("--wheel-dir") + 1])
        with zipfile.ZipFile(out / "pkg-0-py3-none-any.whl", "w") as wheel:
            wheel.writestr("pkg/_m.so", content)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(build.subprocess, "run", run)
    return calls


@pytest.mark.parametrize("change", ["others write the entry", "others write the module",
                                    "another user owns the module"])
def test_built_modules_others_could_have_written_are_built_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """Issue 34: the cache of built revisions copied whatever it found into the checkout."""
    import other_user

    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "cache"))
    module = Path("pkg/_m.so")
    calls = _fake_pip_wheel(monkeypatch, b"built")
    build._build_extensions(tmp_path / "tree", [module], "k")
    assert (tmp_path / "tree" / module).read_bytes() == b"built" and len(calls) == 1
    builds = tmp_path / "cache" / "builds"
    assert stat_mode(builds) == 0o700
    planted = builds / "k" / module
    planted.write_bytes(b"planted")
    if change == "others write the entry":
        os.chmod(builds / "k", 0o777)
    elif change == "others write the module":
        os.chmod(planted, 0o666)
    else:
        if other_user.REASON:
            pytest.skip(other_user.REASON)
        os.chown(planted, other_user.uid(), -1)
    build._build_extensions(tmp_path / "again", [module], "k")
    assert (tmp_path / "again" / module).read_bytes() == b"built" and len(calls) == 2


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_builds_folder_another_user_made_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import other_user

    if other_user.REASON:
        pytest.skip(other_user.REASON)
    shared = Path(tempfile.mkdtemp(prefix="opbench-shared-", dir="/tmp"))
    try:
        os.chmod(shared, 0o1777)
        other_user.run(f"mkdir -m 777 {shared}/builds")
        monkeypatch.setenv("OPBENCH_CACHE_DIR", str(shared))
        _fake_pip_wheel(monkeypatch, b"built")
        with pytest.raises(UntrustedPathError, match=r"builds: it is owned by nobody"):
            build._build_extensions(tmp_path / "tree", [Path("pkg/_m.so")], "k")
    finally:
        shutil.rmtree(shared, ignore_errors=True)
