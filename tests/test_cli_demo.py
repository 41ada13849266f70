"""opbench.integrations.cli.demo: the recipe's batched dot as a Compare table."""
from __future__ import annotations

import pytest

from opbench.integrations import cli
from opbench.integrations.cli import demo

torch = pytest.importorskip("torch")


def test_both_batched_dots_agree() -> None:
    a = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    assert torch.equal(demo.batched_dot_mul_sum(a, a), demo.batched_dot_bmm(a, a))


def test_a_row_per_size_pair_and_a_column_per_method(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--sizes", "1", "8", "--threads", "1", "--min-run-time", "0.001",
                     "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "Batched dot" in out and "mul/sum" in out and "bmm" in out
    for row in ("[1, 1]", "[1, 8]", "[8, 1]", "[8, 8]"):
        assert row in out


def test_a_non_positive_run_time_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--min-run-time", "0"]) == 2
    assert "--min-run-time must be > 0" in capsys.readouterr().err


def test_disturbed_cells_are_measured_again_unless_told_not_to(monkeypatch) -> None:
    import opbench

    asked = []
    real = opbench.run_all

    def run_all(timers, **kwargs):
        asked.append(kwargs["recover"])
        return real(timers, **kwargs)

    monkeypatch.setattr(opbench, "run_all", run_all)
    args = ["demo", "--sizes", "1", "--threads", "1", "--min-run-time", "0.001", "--color", "never"]
    assert cli.main(args) == 0 and cli.main([*args, "--no-recover"]) == 0
    assert asked == [True, False]
