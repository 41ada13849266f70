"""``opbench check``: what makes figures move on this machine, with the fixes. The machine
is simulated (snapshots, process lists and probe readings given), so the verdicts are fixed."""
from __future__ import annotations

import pytest

from opbench import environment
from opbench.integrations.cli import check, main


@pytest.fixture
def machine(monkeypatch):
    """A 2-CPU virtual machine whose state each test sets."""
    state = {"others": 0.0, "speeds": [1000] * 50, "steal": 0.0, "governors": {},
             "turbo": None, "busiest": {}}
    snaps = []

    def snapshot():
        i = len(snaps)
        snaps.append(i)
        return environment.CpuSnapshot(wall=i * 1.0, busy=i * state["others"],
                                       steal=i * state["steal"] * 2, total=i * 2.0, own=0.0)

    def watch(seconds):
        before = {pid: (name, 0.0) for pid, (name, _) in state["busiest"].items()}
        after = {pid: (name, share * seconds) for pid, (name, share) in state["busiest"].items()}
        return state["speeds"], before, after

    monkeypatch.setattr(environment, "cpu_snapshot", snapshot)
    monkeypatch.setattr(environment, "allowed_cpus", lambda: 2)
    monkeypatch.setattr(environment, "hypervisor", lambda: True)
    monkeypatch.setattr(environment, "governors", lambda: state["governors"])
    monkeypatch.setattr(environment, "turbo", lambda: state["turbo"])
    monkeypatch.setattr(environment, "smt_siblings", list)
    monkeypatch.setattr(environment, "isolated_cpus", list)
    monkeypatch.setattr(check, "_watch", watch)
    return state


def test_a_quiet_machine_passes(machine, capsys):
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "other processes kept 0.00 CPUs busy" in out and "(a virtual machine)" in out
    assert "Core speed: 1.00x slower" in out
    assert "Nothing found that moves figures" in out


def test_a_busy_machine_fails_and_names_the_processes_and_fixes(machine, capsys):
    machine.update(others=1.6, speeds=[1000] + [1800] * 40, steal=0.05,
                   busiest={4242: ("cc1plus", 0.98), 77: ("python3", 0.6)},
                   governors={"powersave": 2}, turbo=True)
    assert main(["check"]) == 1
    out = capsys.readouterr().out
    assert "other processes kept 1.60 CPUs busy during the 1 s check (0.40 free)" in out
    assert "98% of a CPU  pid 4242    cc1plus" in out
    assert out.index("cc1plus") < out.index("python3")  # busiest first
    assert "Core speed: 1.80x slower at the median" in out
    assert "the hypervisor gave 5% of CPU time to other guests" in out
    assert "- Other processes are using the CPUs" in out
    assert "- This core ran slower than it can" in out
    assert "- Set the governor to performance" in out and "Turbo: on" in out


def test_bad_seconds_are_refused(machine, capsys):
    assert main(["check", "--seconds", "0"]) == 2
    assert "--seconds must be in (0, 600]" in capsys.readouterr().err


def test_the_real_machine_is_watched(capsys):
    assert main(["check", "--seconds", "0.05"]) in (0, 1)
    out = capsys.readouterr().out
    assert out.startswith("CPUs: ") and "Hyperthreads:" in out and "Isolated CPUs:" in out
