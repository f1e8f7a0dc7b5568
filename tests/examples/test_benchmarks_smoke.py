"""The benchmark harnesses run: quick mode, tiny sizes, no timing assertions.

Timings on CI machines say nothing, so these only check that each harness
produces its rows, that the times are positive and that srcgrad's gradients
agree with the hand-written ones.
"""
from __future__ import annotations

import sys
from pathlib import Path

# benchmarks/ is not part of the installed package: import it from the checkout.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import _env  # noqa: E402
from benchmarks.two_layer import main  # noqa: E402


def test_two_layer_quick_runs_and_gradients_agree(capsys):
    result = main(["--quick"])
    assert [row.dtype for row in result.rows] == ["float64", "float32"]
    for row in result.rows:
        assert row.grads_agree, row
        assert row.hand is not None and row.srcgrad is not None
        assert len(row.hand.samples) == len(row.srcgrad.samples) > 0
        assert all(t > 0 for t in row.hand.samples + row.srcgrad.samples)
        assert row.ratio > 0
    assert result.cold_compile.median > 0 and result.first_compile_s > 0
    assert result.cached_tiny.median > 0 and result.raw_tiny.median > 0
    printed = capsys.readouterr().out
    assert "| float64 |" in printed and "| float32 |" in printed


def test_write_section_keeps_other_sections(tmp_path):
    path = tmp_path / "benchmarks.md"
    _env.write_section("two_layer", "## Two-layer\n\nfirst", path)
    _env.write_section("rnn", "## RNN\n\nrnn numbers", path)
    _env.write_section("two_layer", "## Two-layer\n\nsecond", path)
    text = path.read_text()
    assert text.startswith("# Benchmarks")
    assert "second" in text and "first" not in text
    assert text.index("## Two-layer") < text.index("## RNN") and "rnn numbers" in text


def test_control_flow_quick_runs_and_gradients_agree(capsys):
    from benchmarks import control_flow

    result = control_flow.main(["--quick"])
    assert [row.key for row in result.rows] == ["dynamic_net", "dynamic_net", "rnn", "scalar_loop"]
    for row in result.rows:
        assert row.grads_agree, row
        assert row.hand is not None and row.srcgrad is not None
        assert len(row.hand.samples) == len(row.srcgrad.samples) > 0
        assert all(t > 0 for t in row.hand.samples + row.srcgrad.samples)
        assert row.ratio > 0
        for name, stats in row.peers.items():  # only the peers installed here
            assert row.peer_diffs[name] <= control_flow.PEER_RTOL
            assert all(t > 0 for t in stats.samples)
    memory = {row.impl: row for row in result.memory}
    assert set(memory) == {"hand", "srcgrad", *result.peer_versions}
    for impl in ("hand", "srcgrad"):
        assert memory[impl].grads_agree, memory[impl]
        assert memory[impl].traced_peak > 0 and memory[impl].seconds > 0
    printed = capsys.readouterr().out
    assert "| dynamic net (shared layer called) |" in printed and "| srcgrad |" in printed


def test_control_flow_without_peers_notes_them_and_runs(monkeypatch, capsys):
    from benchmarks import control_flow

    for name in ("autograd", "autograd.numpy", "torch"):
        monkeypatch.setitem(sys.modules, name, None)  # makes `import name` raise ImportError
    result = control_flow.main(["--quick"])
    assert result.peer_versions == {} and len(result.peer_notes) == 2
    assert all(row.grads_agree and row.peers == {} for row in result.rows)
    assert [row.impl for row in result.memory] == ["hand", "srcgrad"]
    printed = capsys.readouterr().out
    assert "autograd is not installed" in printed and "torch is not installed" in printed
    assert "torch / hand" not in printed


def _check_run_result(result):
    from benchmarks import run

    assert [row.work.key for row in result.rows] == [
        "two_layer_f64", "two_layer_f32", "dynamic_net", "rnn", "scalar_loop", "scalar_while", "cnn"]
    for row in result.rows:
        for lib in ("hand", "srcgrad"):
            cell = row.cells[lib]
            assert cell.agree, (row.work.key, lib, cell)
            assert cell.stats is not None and all(t > 0 for t in cell.stats.samples)
        assert row.ratio("srcgrad") > 0
        for lib, cell in row.cells.items():  # only the peers installed here; never their speed
            assert lib in run.LIBRARIES
            if cell.stats is not None:
                assert cell.agree and all(t > 0 for t in cell.stats.samples)
            else:
                assert cell.note  # skipped peers say why
    memory = {row.impl: row for row in result.memory}
    for impl in ("hand", "srcgrad"):
        assert memory[impl].grads_agree and memory[impl].traced_peak > 0


def test_run_quick_all_workloads_all_installed_peers(capsys):
    from benchmarks import run

    result = run.main(["--quick"])
    _check_run_result(result)
    printed = capsys.readouterr().out
    assert "## All workloads against the peers" in printed
    assert "| digits CNN training step, batch 4 | srcgrad |" in printed  # the quick size
    assert "## Compile time against function length" in printed and len(result.compile_time) == 4


def test_compile_time_quick_runs_and_gradients_agree(capsys):
    from benchmarks import compile_time

    rows = compile_time.main(["--quick"])
    assert [(row.shape, row.target) for row in rows] == [
        (shape, n) for shape in compile_time.SHAPES for n in compile_time.QUICK_SIZES]
    for row in rows:
        assert row.error < 1e-5, row  # the generated function's gradient, against central differences
        assert row.statements >= row.target and all(t > 0 for t in row.seconds)
    printed = capsys.readouterr().out
    assert "## Compile time against function length" in printed
    assert "| loops and branches |" in printed and "| straight-line |" in printed


def test_run_quick_without_peers_notes_them_and_runs(monkeypatch, capsys):
    from benchmarks import run

    for name in ("autograd", "autograd.numpy", "torch", "jax", "jax.numpy", "tangent"):
        monkeypatch.setitem(sys.modules, name, None)  # makes `import name` raise ImportError
    result = run.main(["--quick"])
    _check_run_result(result)
    assert result.libraries == {} and len(result.notes) == len(run.PEERS)
    assert all(set(row.cells) == {"hand", "srcgrad"} for row in result.rows)
    printed = capsys.readouterr().out
    assert "tangent is not installed" in printed and "jax is not installed" in printed


def test_jvp_quick_runs_and_tangents_agree(capsys):
    from benchmarks import jvp

    rows = jvp.main(["--quick"])
    assert [row.wrt for row in rows] == ["w1", "w2"]
    assert all(row.agree and row.srcgrad.median > 0 and row.forward.median > 0 for row in rows)
    assert "| w1 | True |" in capsys.readouterr().out


def test_jacobian_quick_runs_and_batched_columns_agree(capsys):
    from benchmarks import jacobian

    results = jacobian.main(["--quick"])
    assert set(results) == {"hessian", "jacfwd", "jacrev"}
    assert all(all(agree.values()) for _, agree in results.values())
    printed = capsys.readouterr().out
    assert "| hessian | batched | True |" in printed and "| jacrev | batched | True |" in printed


def test_compile_once_quick_runs_and_compiles_nothing_while_timed(capsys):
    from benchmarks import compile_once

    rows = compile_once.main(["--quick"])
    assert rows and rows[-1].workload.startswith("alternating layers")
    for row in rows:
        assert row.agree, row
        assert row.compiles == 0, row  # each code compiled once, before the timed calls
        assert row.ratio > 0
    assert "| alternating layers" in capsys.readouterr().out
