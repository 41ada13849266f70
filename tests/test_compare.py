"""Compare tables against torch.utils.benchmark.Compare on the same Measurements."""
from __future__ import annotations

import pickle
import random

import pytest
import torch.utils.benchmark as tb

import opbench
import torch_bugs


def _results(seed: int, *, envs=("A", "B"), descriptions=("mul/sum", "bmm", "[1, 64]")):
    """Random measurements over labels, sub_labels, descriptions, threads and envs,
    with replicates and missing cells; the same specs and times for both libraries."""
    rng = random.Random(seed)
    labels = rng.sample(["Batched dot", "Add", "Matmul"], rng.randint(1, 2))
    env_choice = rng.choice([[None], list(envs)])
    rows = []
    for label in labels:
        for sub_label in rng.sample(["[1, 1]", "[64, 64]", "[1024, 10]", None], 3):
            for threads in rng.sample([1, 4, 16], rng.randint(1, 2)):
                for env in env_choice:
                    for description in descriptions:
                        if rng.random() < 0.15:
                            continue  # a missing cell
                        for _ in range(rng.choice([1, 1, 2])):  # replicates get merged
                            scale = 10 ** rng.uniform(-7.5, -2)
                            n = rng.choice([1, 3, 7, 20])
                            spread = rng.choice([0.01, 0.05, 0.4])
                            times = [scale * (1 + spread * rng.random()) for _ in range(n)]
                            spec = dict(stmt="f(x)", setup="pass", label=label, sub_label=sub_label,
                                        description=description, env=env, num_threads=threads)
                            rows.append((rng.choice([1, 100]), times, spec))
    rng.shuffle(rows)
    ours = [opbench.Measurement(n, [t * n for t in ts], opbench.TaskSpec(**s)) for n, ts, s in rows]
    theirs = [tb.Measurement(n, [t * n for t in ts], tb.TaskSpec(**s)) for n, ts, s in rows]
    return ours, theirs


def _configure(compare, trim: bool, colorize, highlight: bool):
    if trim:
        compare.trim_significant_figures()
    if colorize is not None:
        compare.colorize(rowwise=colorize)
    if highlight:
        compare.highlight_warnings()
    return compare


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("trim, colorize, highlight", [
    (False, None, False), (True, None, False), (True, False, False),
    (False, True, True), (True, True, True),
])
def test_table_text_matches_torch(seed, trim, colorize, highlight):
    ours, theirs = _results(seed)
    a = str(_configure(opbench.Compare(ours), trim, colorize, highlight))
    b = str(_configure(tb.Compare(theirs), trim, colorize, highlight))
    assert a == b


def test_recipe_ab_env_table_matches_torch():
    """The recipe's A/B table: two envs, descriptions as columns, pickled results."""
    rows = []
    for env, factor in (("environment A: mul/sum", 1.0), ("environment B: bmm", 2.1)):
        for (b, n), base in (((1, 1), 7e-6), ((1024, 10000), 36e-3), ((10000, 1), 21e-6)):
            rows.append((env, f"[{b}, {n}]", [base * factor * (1 + 0.01 * i) for i in range(5)]))

    def build(module):
        return [
            pickle.loads(pickle.dumps(module.Measurement(
                1, times, module.TaskSpec("batched_dot(x, x)", "pass", label="Batched dot",
                                          description=d, env=env, num_threads=1))))
            for env, d, times in rows
        ]

    ours, theirs = opbench.Compare(build(opbench)), tb.Compare(build(tb))
    for c in (ours, theirs):
        c.trim_significant_figures()
        c.colorize()
    assert str(ours) == str(theirs)
    assert "(environment A: mul/sum)" in str(ours)


def test_pickle_round_trip_keeps_table():
    ours, _ = _results(3)
    assert str(opbench.Compare(ours)) == str(opbench.Compare(pickle.loads(pickle.dumps(ours))))


def test_print_writes_the_table(capsys):
    ours, _ = _results(5)
    compare = opbench.Compare(ours)
    compare.print()
    assert capsys.readouterr().out == str(compare) + "\n"


def test_extend_results_rejects_non_measurements():
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`"):
        opbench.Compare([object()])
    compare = opbench.Compare([])
    ours, _ = _results(1)
    compare.extend_results(ours)
    assert str(compare) == str(opbench.Compare(ours))


def test_description_none_renders():
    # torch 2.13 raises TypeError (len(None)) for a result without description.
    spec = dict(stmt="f()", setup="pass", label="L", description=None)
    text = str(opbench.Compare([opbench.Measurement(1, [1e-6], opbench.TaskSpec(**spec))]))
    assert "f()  |  1.0" in text
    if not torch_bugs.compare_rejects_description_none():
        assert text == str(tb.Compare([tb.Measurement(1, [1e-6], tb.TaskSpec(**spec))]))


def test_mixed_none_and_string_env_renders():
    # torch 2.13 raises TypeError comparing None with str env inside one label.
    specs = [dict(stmt="f()", setup="pass", label="L", description="d", env=e) for e in (None, "B")]
    text = str(opbench.Compare([opbench.Measurement(1, [1e-6], opbench.TaskSpec(**s)) for s in specs]))
    assert "(Unspecified env)" in text and "(B)" in text
    if not torch_bugs.compare_rejects_mixed_env():
        assert text == str(tb.Compare([tb.Measurement(1, [1e-6], tb.TaskSpec(**s)) for s in specs]))


def test_colorize_marks_best_value():
    ours, _ = _results(7)
    compare = opbench.Compare(ours)
    compare.colorize()
    assert opbench.analysis.compare.BEST in str(compare)
    assert opbench.analysis.compare.BEST not in str(opbench.Compare(ours))


def test_exports_delegate_to_export_module(tmp_path):
    from opbench.analysis import export
    ours, _ = _results(2)
    compare = opbench.Compare(ours)
    assert compare.to_markdown() == export.to_markdown(compare)
    assert compare.to_csv(tmp_path / "t.csv") == (tmp_path / "t.csv").read_text()
    assert compare.to_html().startswith("<")


def test_a_difference_within_the_code_placement_spread_is_flagged():
    # C++ timers with layouts=N carry the spread code placement alone gave them.
    def m(description, median, spread):
        return opbench.Measurement(1, [median] * 5, opbench.TaskSpec(
            "f()", "pass", label="L", sub_label="row", description=description),
            info={"layout_spread": spread})

    text = str(opbench.Compare([m("a", 1.00e-6, 0.06), m("b", 1.04e-6, 0.05),
                                m("c", 1.50e-6, 0.05)]))
    assert "(~) row: b vs a differ by 4.0%, within the code-placement spread (6.0%)" in text
    assert "c vs a" not in text  # 50% is beyond any placement effect
    plain = str(opbench.Compare([opbench.Measurement(1, [1e-6], opbench.TaskSpec("f()", "pass"))]))
    assert "(~)" not in plain  # torch's text is untouched without layouts
