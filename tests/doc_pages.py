"""The documentation's pages (README.md and docs/) and their code blocks, for the tests
that keep them true (test_readme.py, test_docs.py, test_readme_figures.py).

Every fenced block of every page is one of:

* ``python``: runs as a script (a block defining ``test_`` functions runs under pytest
  with opbench's plugin);
* ``py``: needs a GPU or valgrind's run time; compiled to check its syntax;
* ``ipython``: runs as a cell in an IPython shell (the notebook magics), after the
  page's earlier ``ipython`` blocks, as a notebook's cells run;
* ``sh``: every ``opbench`` command line parses with opbench's own argument parser,
  every ``pytest`` option is one the plugin registers, every ``tools/`` script exists;
* no language: program output, introduced by ``<!-- output of ... -->`` (see
  test_readme_figures.py);
* ``{include}``, ``{toctree}``: MyST directives; Sphinx checks their targets.
"""
from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
# Markdown pages (docs/figures/ holds the recorded tables the pages include).
PAGES = [README, *sorted(p for p in DOCS.rglob("*.md") if not {"build", "_build"} & set(p.parts))]
# Blocks that compile C++, run valgrind or start a cluster are in the slow tier.
SLOW = re.compile(r'language="c\+\+"|collect_callgrind|distributed|\bray\b|--callgrind')
KINDS = ("python", "py", "ipython", "sh", "", "{include}", "{toctree}")
# The kinds run() runs or checks (program output is test_readme_figures.py's; Sphinx
# checks the directives).
RUN_KINDS = ("python", "py", "ipython", "sh")

_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
# IPython cells (a JSON list on stdin) run in order in one shell; the exit status says
# whether all succeeded.
_IPYTHON = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
sys.exit(0 if all(shell.run_cell(cell).success for cell in json.load(sys.stdin)) else 1)
"""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    kind: str
    code: str
    # The page's ipython blocks before this one: a notebook's earlier cells.
    earlier: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def slow(self) -> bool:
        return bool(SLOW.search(self.code))


def blocks(page: Path, text: str | None = None) -> list[Block]:
    """The fenced blocks of ``page`` (or of ``text``, read as that page), in order."""
    text = page.read_text() if text is None else text
    found: list[Block] = []
    for m in _FENCE.finditer(text):
        earlier = tuple(b.code for b in found if b.kind == "ipython") if m[1] == "ipython" else ()
        found.append(Block(page, text.count("\n", 0, m.start()) + 1, m[1], m[2], earlier))
    return found


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page)]


def run(block: Block, tmp_path: Path, plugin_args: list[str]) -> None:
    """Runs (or checks) one block; an AssertionError says what failed."""
    if block.kind == "py":
        compile(block.code, block.id, "exec")
        return
    if block.kind == "sh":
        problems = check_shell(block.code)
        assert not problems, f"{block.id}: " + "; ".join(problems)
        return
    stdin = None
    if block.kind == "ipython":
        cmd, stdin = [sys.executable, "-c", _IPYTHON], json.dumps([*block.earlier, block.code])
    elif "def test_" in block.code:
        (tmp_path / "test_example.py").write_text(block.code)
        cmd = [sys.executable, "-m", "pytest", "-q", *plugin_args, "test_example.py"]
    else:
        cmd = [sys.executable, "-c", block.code]
    proc = subprocess.run(cmd, cwd=tmp_path, input=stdin, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{block.id}:\n" + proc.stdout[-3000:] + proc.stderr[-3000:]


def _commands(line: str) -> list[list[str]]:
    """The commands of one shell line (``a && b``), comments dropped."""
    words = shlex.split(line, comments=True)
    commands, current = [], []
    for word in words:
        if word in ("&&", "||", ";", "|"):
            commands.append(current)
            current = []
        else:
            current.append(word)
    return [c for c in [*commands, current] if c]


def _args_of(program: str, words: list[str]) -> list[str] | None:
    """The arguments of a ``PROGRAM ...`` or ``python -m PROGRAM ...`` command, else None."""
    if words[0] == program:
        return words[1:]
    if len(words) > 2 and words[0].endswith(("python", "python3")) and words[1:3] == ["-m", program]:
        return words[3:]
    return None


def parse_problem(args: list[str]) -> str | None:
    """Why ``opbench ARGS`` does not parse (as ``opbench.integrations.cli.main`` parses
    it, ``-- COMMAND`` included), or None."""
    from opbench.integrations.cli import _takes_a_command, build_parser

    parser = build_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parsed, unknown = parser.parse_known_args(args)
            if "--" in args and _takes_a_command(parsed._parser):
                parsed, unknown = parser.parse_known_args(args[:args.index("--")])
    except SystemExit:
        return f"`opbench {shlex.join(args)}`: {err.getvalue().strip().splitlines()[-1]}"
    if unknown:
        return f"`opbench {shlex.join(args)}`: unrecognized arguments {unknown}"
    return None


def pytest_option_names() -> set[str]:
    """Every option the plugin registers (its own and pytest-benchmark's it serves)."""
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from opbench_docs import recorded_pytest_options
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    return {name for group in recorded_pytest_options() for names, _ in group.options for name in names}


def check_shell(code: str) -> list[str]:
    """What is wrong with the command lines of an ``sh`` block."""
    problems = []
    options = None
    for line in code.splitlines():
        for words in _commands(line):
            if (args := _args_of("opbench", words)) is not None:
                if (problem := parse_problem(args)) is not None:
                    problems.append(problem)
            elif (args := _args_of("pytest", words)) is not None:
                options = pytest_option_names() if options is None else options
                asked = {w.split("=", 1)[0] for w in args if w.startswith(("--opbench", "--benchmark"))}
                problems += [f"pytest has no option {o}" for o in sorted(asked - options)]
            elif words[0].startswith("tools/") and not (ROOT / words[0]).is_file():
                problems.append(f"{words[0]} does not exist")
    return problems
