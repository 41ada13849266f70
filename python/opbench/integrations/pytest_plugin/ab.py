"""``--opbench-base REV``: the pytest face of ``opbench ab`` (``opbench.gate.ab_session``).

This same pytest command, less the A/B options, runs on REV and on the working tree in
interleaved rounds; this process prints the report (and writes ``--opbench-report``)
and exits with the A/B's status instead of running the tests itself. Otherwise the
instruction mode's rerun under callgrind (``callgrind_rerun``), or memory mode's with the
allocation counter (``memory_rerun``), decides.
"""
from __future__ import annotations

import sys

import pytest

from opbench.integrations.pytest_plugin import callgrind_rerun, memory_rerun

# Options of the session that `--opbench-base` runs itself, not passed to its runs.
_AB_OPTIONS = ("--opbench-base", "--opbench-rounds", "--opbench-wave", "--opbench-report", "--opbench-format",
               "--opbench-fail-above", "--opbench-inconclusive", "--opbench-mode")


def _without(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """``argv`` less each of ``options`` and its value (``--opt VALUE`` or ``--opt=VALUE``)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in options:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def _ab_main(config: pytest.Config, base: str) -> int:
    from opbench._files import atomic_write_text
    from opbench.gate.ab_session import run_ab
    from opbench.gate.revision import RevisionError, sigterm_as_interrupt
    from opbench.integrations.cli import UsageError, parse_fraction

    opt = config.getoption
    for clash in ("opbench_compare", "opbench_save", "opbench_autosave"):
        if opt(clash):
            raise pytest.UsageError(f"--opbench-base runs its own rounds: drop "
                                    f"--{clash.replace('_', '-')}")
    if opt("opbench_disable") or opt("numprocesses", None):
        raise pytest.UsageError("--opbench-base times each side in one process a round: drop "
                                "--opbench-disable and -n")
    for name in ("rounds", "wave"):
        if opt(f"opbench_{name}") < 1:
            raise pytest.UsageError(f"--opbench-{name} must be a positive integer")
    try:
        threshold = (parse_fraction(opt("opbench_fail_above"), "--opbench-fail-above")
                     if opt("opbench_fail_above") else 0.05)
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, "-m", "pytest", *sys.argv[1:]])
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    try:
        with sigterm_as_interrupt():
            report = run_ab(_without(argv, _AB_OPTIONS), base, rounds=opt("opbench_rounds"),
                            mode=opt("opbench_mode"), threshold=threshold,
                            inconclusive=opt("opbench_inconclusive"),
                            wave=opt("opbench_wave"))
    except RevisionError as e:
        raise pytest.UsageError(f"--opbench-base: {e}") from None
    sys.stdout.write(report.text())
    if opt("opbench_report"):
        written = report.redacted() if opt("opbench_redact") else report
        atomic_write_text(opt("opbench_report"), written.render(opt("opbench_format")))
        sys.stdout.write(f"opbench: wrote the report to {opt('opbench_report')}\n")
    sys.stdout.flush()
    if report.interrupted:
        return int(pytest.ExitCode.INTERRUPTED)
    return int(pytest.ExitCode.TESTS_FAILED) if report.exit_status else int(pytest.ExitCode.OK)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """With --opbench-base, runs the A/B session and exits with its status; otherwise
    instruction mode's rerun under callgrind (``callgrind_rerun``) or memory mode's with
    the allocation counter (``memory_rerun``) may take over."""
    base = config.getoption("opbench_base")
    if base is not None:
        return _ab_main(config, base)
    status = callgrind_rerun.rerun_under_callgrind(config)
    return memory_rerun.rerun_with_counter(config) if status is None else status
