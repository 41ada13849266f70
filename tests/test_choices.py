"""opbench._choices: the gate's and ab's named choices, declared once, are what every
face of them accepts: the functions' checks, the command line and the pytest plugin."""
from __future__ import annotations

import argparse
import inspect
from typing import Any

import pytest

from opbench import _choices, gate
from opbench.core.measurement import Measurement, TaskSpec
from opbench.integrations.cli import build_parser
from opbench.integrations.pytest_plugin import options
from opbench.revisions import session


def _subcommand(name: str) -> dict[str, argparse.Action]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a for a in sub.choices[name]._actions}


class _Recorder:
    """A stand-in for pytest's parser: records each option's keyword arguments."""

    def __init__(self) -> None:
        self.options: dict[str, dict[str, Any]] = {}

    def getgroup(self, *args: Any) -> _Recorder:
        return self

    def addoption(self, name: str, **kwargs: Any) -> None:
        self.options[name] = kwargs


def _plugin_options() -> dict[str, dict[str, Any]]:
    recorder = _Recorder()
    options.add_options(recorder)  # type: ignore[arg-type]
    return recorder.options


def test_the_command_lines_options_offer_the_declared_choices_and_defaults() -> None:
    ab, compare = _subcommand("ab"), _subcommand("compare")
    assert tuple(ab["mode"].choices) == _choices.MODES
    assert tuple(ab["inconclusive"].choices) == _choices.POLICIES
    assert tuple(ab["interleave"].choices) == _choices.INTERLEAVES
    assert tuple(ab["format"].choices) == _choices.FORMATS
    assert tuple(ab["run_statistic"].choices) == tuple(_choices.RUN_STATISTICS)
    assert (ab["rounds"].default, ab["wave"].default) == (_choices.ROUNDS, _choices.WAVE)
    assert tuple(compare["inconclusive"].choices) == _choices.POLICIES
    assert tuple(compare["gate_on"].choices) == tuple(_choices.GATE_METRICS)
    assert tuple(compare["format"].choices) == _choices.FORMATS


def test_the_plugins_options_offer_the_declared_choices_and_defaults() -> None:
    opts = _plugin_options()
    assert opts["--opbench-inconclusive"]["choices"] == _choices.POLICIES
    assert opts["--opbench-gate-on"]["choices"] == _choices.GATE_METRICS
    assert opts["--opbench-format"]["choices"] == _choices.FORMATS
    assert opts["--opbench-mode"]["choices"] == _choices.MODES
    assert opts["--opbench-rounds"]["default"] == _choices.ROUNDS
    assert opts["--opbench-wave"]["default"] == _choices.WAVE
    # The help names the default it shows from the value itself.
    assert "%(default)s" in opts["--opbench-rounds"]["help"]


def test_the_functions_check_against_the_declared_choices() -> None:
    assert gate.METRICS == _choices.GATE_METRICS
    assert (gate.POLICIES, gate.FORMATS) == (_choices.POLICIES, _choices.FORMATS)
    assert session.RUN_STATISTICS == _choices.RUN_STATISTICS
    defaults = inspect.signature(session.run_ab).parameters
    assert (defaults["rounds"].default, defaults["wave"].default) == (_choices.ROUNDS,
                                                                       _choices.WAVE)
    m = [Measurement(1, [1e-6] * 5, TaskSpec("f()", "pass"))]
    with pytest.raises(ValueError, match="fail, warn, pass"):
        gate.compare(m, m, inconclusive="ignore")
    with pytest.raises(ValueError, match="time, instructions"):
        session.run_ab(["true"], "HEAD", mode="cycles", log=None)
