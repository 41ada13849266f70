"""Revisions: run a command at a git revision of a project and collect the results
file it saved.

``opbench ab`` (base against the working tree) and ``opbench find`` (bisect)
both need the same thing: the project's code as it was at some commit, made
importable, a command run on it, and the opbench results that run saved. This
module does that and nothing else:

1. **A checkout.** ``checkout(REV)`` makes a ``git worktree`` of the commit
   REV resolves to in a temporary folder (detached, so no branch is touched),
   and removes it again on ``close()`` (a ``with`` block closes it, also on
   Ctrl-C; the record of a worktree left by a killed process is removed by the
   next one, by its path: the user's own worktrees are never pruned).
   ``working_tree()`` is the other side of an A/B: the repository as it is now,
   uncommitted edits included, with no copy.
2. **Importable.** The command runs with the checkout's source roots first on
   ``PYTHONPATH``, so ``import yourpackage`` finds the revision's code before
   any installed copy. The roots come from ``pyproject.toml``
   (scikit-build-core's ``wheel.packages``, setuptools' ``package-dir``), else
   ``src/`` when it holds packages, else the repository root. Compiled
   extension modules (a ``.so`` next to the Python files, git-ignored, as
   opbench's own ``_C``) are not in git: when the revision's native sources
   (C, C++, CUDA, Cython, CMake files) are identical to the working tree's,
   the working tree's built modules are copied in; otherwise the revision is
   built once with ``pip wheel --no-deps --no-build-isolation`` (the build
   backend and compilers of the current environment) and its extension
   modules are kept in a cache keyed by the native sources
   (``$OPBENCH_CACHE_DIR/builds``, default ``~/.cache/opbench/builds``; made
   with mode 0700, and an entry another user owns or can write is built again,
   never copied), so a
   bisect over Python-only commits builds nothing and one over C++ commits
   builds each distinct source once. A project that needs more (an install
   into a virtual environment, generated files) passes ``prepare=[...]``: a
   command run once in the checkout before anything else.
3. **Where results go.** Each run gets a fresh results-file path in
   ``$OPBENCH_RESULTS_FILE`` (``RESULTS_ENV``). The pytest plugin saves the
   session there; a script saves there itself
   (``opbench.store.results.save(ms, os.environ["OPBENCH_RESULTS_FILE"])``). A pytest
   command (``pytest ...`` or ``python -m pytest ...``) also gets
   ``--opbench-save=PATH`` appended, so revisions older than the variable save
   too.
4. **Runs.** ``Checkout.run`` runs the command in the checkout (in the same
   sub-folder the caller is in), its own process group, output captured, and
   returns a ``Run``: exit status, the results file if one was written, the
   output's tail, seconds taken. A run that fails is a ``Run`` with
   ``ok == False``, never an exception. Ctrl-C stops the command's whole
   process group (SIGINT, then SIGKILL after a grace period) and re-raises
   ``KeyboardInterrupt``; the Runs returned before it keep their files.

Example (a throwaway repository with one commit)::

    >>> import subprocess, sys, tempfile
    >>> repo = tempfile.mkdtemp()
    >>> git = lambda *a: subprocess.run(["git", "-C", repo, *a], check=True, capture_output=True)
    >>> _ = git("init", "-q"); _ = open(f"{repo}/m.py", "w").write("X = 1\\n")
    >>> _ = git("add", "."); _ = git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "one")
    >>> with checkout("HEAD", repo) as c:
    ...     run = c.run([sys.executable, "-c", "import m; print(m.X)"])
    >>> run.returncode, run.output.strip(), run.commit == resolve("HEAD", repo)
    (0, '1', True)
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from opbench._ownership import private_folder, problem
from opbench.errors import Error

__all__ = ["RESULTS_ENV", "Checkout", "RevisionError", "Run", "checkout", "resolve", "run_at",
           "sigterm_as_interrupt", "working_tree"]

RESULTS_ENV = "OPBENCH_RESULTS_FILE"
CACHE_ENV = "OPBENCH_CACHE_DIR"
# Files whose change means the compiled extension modules must be rebuilt.
_NATIVE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh",
                    ".pyx", ".pxd", ".cmake")
_NATIVE_NAMES = ("CMakeLists.txt", "setup.py", "meson.build")
_EXTENSION_SUFFIXES = (".so", ".pyd")
# Seconds a stopped command has to exit after SIGINT (then SIGKILL).
_GRACE = 5.0
# Characters of output a Run keeps (the end: where errors are).
_OUTPUT_TAIL = 20_000
_WORKTREE_PREFIX = "opbench-rev-"


class RevisionError(Error, RuntimeError):
    """A revision that cannot be resolved, checked out or made importable."""


@dataclasses.dataclass(frozen=True)
class Run:
    """One command run at one revision.

    Attributes:
        revision: the revision as given ("HEAD~1", "main", "working tree").
        commit: the full commit id it resolved to (the working tree: HEAD's, with
            ``+dirty`` when it has uncommitted changes).
        command: the command as run.
        returncode: its exit status (negative: killed by that signal).
        results: the results file the run saved, or None when it saved none.
        output: the end of its stdout and stderr, interleaved.
        seconds: wall time of the run.
    """

    revision: str
    commit: str
    command: tuple[str, ...]
    returncode: int
    results: Path | None
    output: str
    seconds: float

    @property
    def ok(self) -> bool:
        """It exited with status 0 and saved a results file."""
        return self.returncode == 0 and self.results is not None

    @property
    def problem(self) -> str:
        """Why it is not ok ("" when it is), for a report."""
        if self.returncode != 0:
            how = (f"killed by signal {-self.returncode}" if self.returncode < 0
                   else f"exited with status {self.returncode}")
            return f"{how}; last output: {_last_lines(self.output)}"
        if self.results is None:
            return (f"saved no results file (a script must save to ${RESULTS_ENV}; a pytest "
                    "run needs at least one benchmark)")
        return ""


def _last_lines(text: str, n: int = 3) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:]) if lines else "(none)"


def _git(repo: str | os.PathLike[str], *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise RevisionError(f"git {' '.join(args)} (in {repo}) failed: "
                            f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def _toplevel(repo: str | os.PathLike[str]) -> Path:
    if not Path(repo).is_dir():
        raise RevisionError(f"{repo}: no such folder (pass the project's git repository)")
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--show-toplevel"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RevisionError(f"{repo} is not inside a git repository: run from the project's "
                            "checkout (or pass repo=)")
    return Path(proc.stdout.strip())


def resolve(rev: str, repo: str | os.PathLike[str] = ".") -> str:
    """The full commit id ``rev`` names in ``repo`` (a branch, tag, ``HEAD~2``, a short id).

    Raises:
        RevisionError: not a git repository, or ``rev`` names no commit.
    """
    top = _toplevel(repo)
    proc = subprocess.run(["git", "-C", str(top), "rev-parse", "--verify", "--quiet",
                           f"{rev}^{{commit}}"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RevisionError(f"{rev!r} names no commit in {top} (check the spelling, or "
                            "`git fetch` the branch)")
    return proc.stdout.strip()


# -- making a checkout importable ----------------------------------------------------

def _source_roots(root: Path) -> list[Path]:
    """The folders to put on PYTHONPATH so the project's packages import from ``root``."""
    roots: list[Path] = []
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            import tomllib
        except ImportError:  # Python < 3.11: fall back to the layout
            tomllib = None  # type: ignore[assignment]
        if tomllib is not None:
            try:
                doc = tomllib.loads(pyproject.read_text())
            except (ValueError, OSError):
                doc = {}
            tool = doc.get("tool", {})
            packages = tool.get("scikit-build", {}).get("wheel", {}).get("packages", [])
            roots += [(root / p).parent for p in packages if isinstance(p, str)]
            package_dir = tool.get("setuptools", {}).get("package-dir", {})
            if isinstance(package_dir, dict) and isinstance(package_dir.get(""), str):
                roots.append(root / package_dir[""])
    if not roots and (root / "src").is_dir() and any((root / "src").glob("*/__init__.py")):
        roots.append(root / "src")
    roots.append(root)
    unique: list[Path] = []
    for r in roots:
        if r.is_dir() and r not in unique:
            unique.append(r)
    return unique


def _extension_modules(top: Path) -> list[Path]:
    """The working tree's built extension modules (ignored by git), relative to ``top``."""
    listed = _git(top, "ls-files", "--others", "--ignored", "--exclude-standard", "-z", "--",
                  *[f":(glob)**/*{s}" for s in _EXTENSION_SUFFIXES])
    found = []
    for name in filter(None, listed.split("\0")):
        path = Path(name)
        # Only modules inside a package (not build trees, not a virtual environment).
        if (top / path.parent / "__init__.py").is_file() and not any(
                part in ("build", ".venv", "venv", "site-packages") for part in path.parts):
            found.append(path)
    return found


def _native_pathspecs() -> list[str]:
    return ([f":(glob)**/*{s}" for s in _NATIVE_SUFFIXES]
            + [f":(glob)**/{n}" for n in _NATIVE_NAMES])


def _is_native(name: str) -> bool:
    return name.endswith(_NATIVE_SUFFIXES) or Path(name).name in _NATIVE_NAMES


def _native_key(top: Path, commit: str) -> str:
    """A hash of the revision's native sources (the cache key of its built modules)."""
    listing = "\n".join(line for line in _git(top, "ls-tree", "-r", commit).splitlines()
                        if _is_native(line.rsplit("\t", 1)[-1]))
    return hashlib.sha256(f"{sys.version}|{listing}".encode()).hexdigest()[:24]


def _cache_dir() -> Path:
    """Where built extension modules are kept: ``$OPBENCH_CACHE_DIR`` or ~/.cache/opbench."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "opbench"


def _build_extensions(tree: Path, modules: list[Path], key: str) -> None:
    """Puts the revision's compiled ``modules`` into ``tree``: from the cache, else built
    with ``pip wheel`` (then cached). The cache's ``builds`` folder is private (mode
    0700); an entry another user owns or could have written is built again, never
    copied: the modules run in every command of the checkout.

    Raises:
        UntrustedPathError: the ``builds`` folder (or one above it) is another user's or
            writable by others.
    """
    builds = private_folder(_cache_dir() / "builds", what="copy compiled modules from",
                            fix="Set $OPBENCH_CACHE_DIR to a folder of your own.")
    cached = builds / key
    if not _cached(cached, modules):
        with tempfile.TemporaryDirectory(prefix="opbench-wheel-") as out:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                 "--quiet", "--wheel-dir", out, str(tree)],
                capture_output=True, text=True, stdin=subprocess.DEVNULL)
            wheels = list(Path(out).glob("*.whl"))
            if proc.returncode != 0 or not wheels:
                raise RevisionError(
                    f"building the compiled modules of {tree} failed (pip wheel, exit "
                    f"{proc.returncode}): {_last_lines(proc.stdout + proc.stderr, 8)}")
            staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=builds))
            with zipfile.ZipFile(wheels[0]) as wheel:
                names = set(wheel.namelist())
                for m in modules:
                    # In the wheel a module sits at its import path: drop the source root.
                    inside = next((n for n in names if m.as_posix().endswith(n)
                                   and n.endswith(m.name)), None)
                    if inside is None:
                        shutil.rmtree(staging, ignore_errors=True)
                        raise RevisionError(f"the wheel built from {tree} has no {m.name}")
                    (staging / m).parent.mkdir(parents=True, exist_ok=True)
                    (staging / m).write_bytes(wheel.read(inside))
            shutil.rmtree(cached, ignore_errors=True)
            os.replace(staging, cached)  # whole or not at all, for a concurrent reader
    for m in modules:
        (tree / m).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cached / m, tree / m)


def _cached(entry: Path, modules: list[Path]) -> bool:
    """Whether ``entry`` holds every module, and it and they are yours alone (no link,
    nothing another user owns or can write)."""
    return problem(entry) is None and all(
        problem(entry / m) is None and (entry / m).is_file() for m in modules)


def _is_pytest(command: Sequence[str]) -> bool:
    if not command:
        return False
    names = ("pytest", "py.test")
    return (Path(command[0]).name in names or list(command[1:3]) == ["-m", "pytest"]
            or (len(command) > 1 and (command[1] == "-mpytest"
                                      or Path(command[1]).name in names)))


# -- checkouts -------------------------------------------------------------------

class Checkout:
    """A revision made runnable: its files in ``path``, the environment that imports them.

    Made by ``checkout()`` (a temporary git worktree) or ``working_tree()`` (the
    repository itself). Use as a context manager, or call ``close()``.

    Attributes:
        revision: as given.
        commit: the full commit id (``working_tree()``: HEAD's, ``+dirty`` if edited).
        path: the folder holding the revision's files.
        subdir: where in it commands run (the caller's folder, relative to the repository).
    """

    def __init__(self, revision: str, commit: str, path: Path, subdir: Path,
                 owned: bool, repo: Path) -> None:
        self.revision = revision
        self.commit = commit
        self.path = path
        self.subdir = subdir
        self._owned = owned
        self._repo = repo
        self.roots = _source_roots(path)

    def __repr__(self) -> str:
        return f"Checkout({self.revision!r}, commit={self.commit[:12]!r}, path={str(self.path)!r})"

    def __enter__(self) -> Checkout:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def environment(self, results_file: str | os.PathLike[str] | None = None,
                    extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """``os.environ`` with the checkout's source roots first on PYTHONPATH, ``extra``,
        and ``$OPBENCH_RESULTS_FILE`` set to ``results_file`` (when given)."""
        env = dict(os.environ)
        path = [str(r) for r in self.roots]
        if env.get("PYTHONPATH"):
            path.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(path)
        env.pop(RESULTS_ENV, None)
        if results_file is not None:
            env[RESULTS_ENV] = str(results_file)
        env.update(extra or {})
        return env

    def run(self, command: Sequence[str], *, results_file: str | os.PathLike[str] | None = None,
            env: Mapping[str, str] | None = None, timeout: float | None = None,
            echo: bool = False, pass_fds: Sequence[int] = (),
            after_spawn: Callable[[], None] | None = None) -> Run:
        """Runs ``command`` in the checkout and returns the Run (see the module doc).

        Args:
            command: the program and its arguments (no shell).
            results_file: where the run saves its results (``$OPBENCH_RESULTS_FILE``);
                default: a fresh path in a temporary folder, kept after the run.
            env: more environment variables for the command.
            timeout: seconds after which the command is stopped (a failed Run).
            echo: also copy the command's output to this process's stdout as it comes.
            pass_fds: file descriptors the command inherits (``subprocess.Popen``'s).
            after_spawn: called once the command's process exists (or failed to
                start): where the caller may close its copies of ``pass_fds``.

        Raises:
            KeyboardInterrupt: Ctrl-C (the command's process group was stopped first).
            ValueError: an empty command.
        """
        command = [str(c) for c in command]
        if not command:
            raise ValueError("command is empty: give the program to run and its arguments")
        # A program given by a relative path (.venv/bin/python) is the caller's, not the
        # checkout's: the worktree has no virtual environment.
        if os.sep in command[0] and not os.path.isabs(command[0]) and os.path.exists(command[0]):
            command[0] = os.path.abspath(command[0])
        if self.path is None or not self.path.is_dir():
            raise RevisionError(f"{self!r} is closed")
        if results_file is None:
            results_file = Path(tempfile.mkdtemp(prefix="opbench-run-")) / "results.json"
        results_file = Path(results_file).absolute()
        results_file.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            results_file.unlink()  # a file there from before would read as this run's
        if _is_pytest(command):
            command = [*command, f"--opbench-save={results_file}"]
        cwd = self.path / self.subdir
        if not cwd.is_dir():
            cwd = self.path
        start = time.monotonic()
        returncode, output = _run_group(command, cwd, self.environment(results_file, env),
                                        timeout, echo, tuple(pass_fds), after_spawn)
        return Run(self.revision, self.commit, tuple(command), returncode,
                   results_file if results_file.is_file() else None, output,
                   time.monotonic() - start)

    def close(self) -> None:
        """Removes the worktree (nothing for ``working_tree()``). Safe to call twice."""
        if not self._owned or self.path is None:
            return
        path, self._owned = self.path, False
        _remove_worktree(self._repo, path)


def _remove_worktree(repo: Path, path: Path) -> None:
    """Removes opbench's worktree at ``path``: its files and its record in ``repo``, by
    path. Never ``git worktree prune``: that drops every worktree whose folder is
    missing for the moment (an unmounted disk), the user's own with their index."""
    _git(repo, "worktree", "remove", "--force", str(path), check=False)
    shutil.rmtree(path, ignore_errors=True)


def _remove_stale_worktrees(repo: Path) -> None:
    """Removes the records of opbench's own worktrees whose folders are gone (a run that
    was killed, its temporary folder since cleaned): only those named as opbench names
    them, each by its path."""
    listing = _git(repo, "worktree", "list", "--porcelain", "-z", check=False)
    for field in listing.split("\0"):
        if not field.startswith("worktree "):
            continue
        path = Path(field[len("worktree "):])
        if path.name.startswith(_WORKTREE_PREFIX) and not path.exists():
            _remove_worktree(repo, path)


# Commands running now (in any thread), so Ctrl-C in the main thread can stop them all.
_RUNNING: set[subprocess.Popen[bytes]] = set()
_RUNNING_LOCK = threading.Lock()


def _stop_running() -> None:
    """Stops every command this process is running (Ctrl-C while runs go on in threads)."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        _stop(proc)


def _run_group(command: list[str], cwd: Path, env: dict[str, str], timeout: float | None,
               echo: bool, pass_fds: tuple[int, ...] = (),
               after_spawn: Callable[[], None] | None = None) -> tuple[int, str]:
    """Runs ``command`` in a process group of its own; returns (exit status, output tail).
    Ctrl-C or the timeout stops the whole group."""
    with tempfile.TemporaryFile(mode="w+b") as log:
        try:
            proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE if echo else log,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    pass_fds=pass_fds)
        except OSError as e:  # no such program, not executable: a failed run, as a shell says
            return 127, f"cannot run {command[0]!r}: {e.strerror or e}\n"
        finally:
            if after_spawn is not None:
                after_spawn()
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
        try:
            if echo:
                assert proc.stdout is not None
                for chunk in iter(lambda: proc.stdout.readline(), b""):  # type: ignore[union-attr]
                    log.write(chunk)
                    sys.stdout.write(chunk.decode(errors="replace"))
                    sys.stdout.flush()
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            returncode = proc.returncode if proc.returncode is not None else -signal.SIGKILL
            log.write(f"\n(opbench: stopped after the {timeout:g} s timeout)\n".encode())
        except BaseException:  # Ctrl-C, or anything else: never leave the command running
            _stop(proc)
            raise
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
            if proc.stdout is not None:
                proc.stdout.close()
        log.seek(0, os.SEEK_END)
        size = log.tell()
        log.seek(max(0, size - _OUTPUT_TAIL))
        return returncode, log.read().decode(errors="replace")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT to the process group (pytest saves what finished), SIGKILL after the grace."""
    for sig, wait in ((signal.SIGINT, _GRACE), (signal.SIGKILL, _GRACE)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)


def _subdir(top: Path) -> Path:
    """The current folder relative to the repository ``top`` (``.`` outside it)."""
    try:
        return Path.cwd().resolve().relative_to(top.resolve())
    except ValueError:
        return Path(".")


def working_tree(repo: str | os.PathLike[str] = ".") -> Checkout:
    """The repository as it is now (uncommitted edits included) as a Checkout; nothing is
    copied and ``close()`` removes nothing.

    Raises:
        RevisionError: ``repo`` is not in a git repository.
    """
    top = _toplevel(repo)
    commit = _git(top, "rev-parse", "HEAD", check=False) or "(no commit)"
    dirty = _git(top, "status", "--porcelain", "--untracked-files=no", check=False)
    return Checkout("working tree", commit + ("+dirty" if dirty else ""), top, _subdir(top),
                    owned=False, repo=top)


def checkout(rev: str, repo: str | os.PathLike[str] = ".", *,
             prepare: Sequence[str] | None = None, folder: str | os.PathLike[str] | None = None,
             timeout: float | None = None) -> Checkout:
    """The commit ``rev`` names, as a temporary git worktree made importable (module doc).

    Args:
        rev: a branch, tag, commit id or expression (``HEAD~1``, ``main``).
        repo: any folder inside the repository (default: the current one).
        prepare: a command run once in the worktree after checking it out (an
            install, a code generator); its failure is a RevisionError.
        folder: where to make the worktree's folder (default: the system's temp).
        timeout: seconds ``prepare`` may take.

    Raises:
        RevisionError: no such commit, git failing, a build or ``prepare`` failing.
    """
    top = _toplevel(repo)
    commit = resolve(rev, top)
    _remove_stale_worktrees(top)
    path = Path(tempfile.mkdtemp(prefix=f"{_WORKTREE_PREFIX}{commit[:10]}-", dir=folder))
    try:
        _git(top, "worktree", "add", "--detach", "--force", str(path), commit)
        modules = _extension_modules(top)
        if modules:
            same = subprocess.run(
                ["git", "-C", str(top), "diff", "--quiet", commit, "--", *_native_pathspecs()],
                stdin=subprocess.DEVNULL, capture_output=True).returncode == 0
            if same:
                for m in modules:
                    (path / m).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(top / m, path / m)
            else:
                _build_extensions(path, modules, _native_key(top, commit))
        result = Checkout(rev, commit, path, _subdir(top), owned=True, repo=top)
        if prepare:
            done = result.run(list(prepare), timeout=timeout)
            if done.returncode != 0:
                raise RevisionError(f"prepare command {list(prepare)} failed at {rev} "
                                    f"({commit[:12]}): {done.problem}")
        return result
    except BaseException:
        _remove_worktree(top, path)
        raise


def run_at(rev: str, command: Sequence[str], *, repo: str | os.PathLike[str] = ".",
           results_file: str | os.PathLike[str] | None = None,
           env: Mapping[str, str] | None = None, timeout: float | None = None,
           prepare: Sequence[str] | None = None) -> Run:
    """One command at one revision: ``checkout``, ``Checkout.run``, ``close``.

    ``rev`` None (or "working tree") runs in the working tree itself.

    Example::

        run = run_at("HEAD~1", ["pytest", "benchmarks/", "-q"])
        if run.ok:
            results = opbench.store.results.load(run.results)
    """
    if rev is None or rev == "working tree":
        ctx = working_tree(repo)
    else:
        ctx = checkout(rev, repo, prepare=prepare, timeout=timeout)
    with ctx as c:
        return c.run(command, results_file=results_file, env=env, timeout=timeout)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM handled as Ctrl-C (KeyboardInterrupt) while the block runs: a CI runner's
    cancel then removes worktrees and keeps finished runs, as Ctrl-C does. A no-op off the
    main thread."""
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
