"""The examples run end to end (in their quick mode) and write what they promise.

Each example is run as a user runs it, in a subprocess, so that its command
line, its exit status and the files it writes are what is tested.  The
examples need the project's ``examples`` extra (scikit-learn, matplotlib,
tqdm); without it these tests are skipped.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, out: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, SRCGRAD_QUICK="1", MPLBACKEND="Agg")
    # srcgrad from this checkout, whether or not it is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, str(ROOT / "examples" / name), "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def test_digits_cnn_quick(tmp_path):
    for module in ("sklearn", "matplotlib", "tqdm"):
        pytest.importorskip(module)
    result = run_example("digits_cnn.py", tmp_path)
    assert result.returncode == 0, f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"

    plot = tmp_path / "digits_cnn.png"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code = (tmp_path / "digits_cnn_grad.py").read_text()
    compile(code, "digits_cnn_grad.py", "exec")  # the saved gradient code is valid Python
    assert "def loss_value_and_grad(" in code
    # One flat function: the model's forward and each layer inlined (the convolution's
    # weight adjoint, one matrix product of the im2col patches), no run-time calls.
    assert code.count("\ndef ") == 1 and "vjp" not in code and "pullback" not in code
    assert "conv = model.conv" in code and "y = cols.T @ " in code
    assert "# layers.py:" in code and code.index("# layers.py:") < code.index("# functional.py:")
    # It is shown to the user too, and the script reports its own checks.
    assert "def loss_value_and_grad(" in result.stdout
    assert "gradient check: srcgrad agrees with finite differences" in result.stdout
    assert "test accuracy:" in result.stdout


# ---- the tutorial gallery, examples 01-07 ------------------------------------
# Each needs only NumPy.  Each checks its own numbers in quick mode and exits
# non-zero with "FAILED: ..." when a check fails; the test also looks for a line
# or two showing that it printed its generated code and ran its checks.
GALLERY = {
    "01_numpy_warmup.py": ["def loss_value_and_grad(w1, w2, x, y",
                           "srcgrad and the hand-written backward agree at every one of 50 steps",
                           "01_numpy_warmup: all checks passed"],
    "03_autograd.py": ["def out_grad_grad(x", "def loss_grad_grad(w1, w2, x, y",
                       "the generated gradient matches the hand-written backward",
                       "03_autograd: all checks passed"],
    "04_custom_function.py": ["check_grads: my_relu_adjoint agrees with central finite differences",
                              "    h_bar[h < 0] = 0",
                              "04_custom_function: all checks passed"],
    "05_static_graph.py": ["---- what the optimizer changed", "first call (compile + run):",
                           "05_static_graph: all checks passed"],
    "06_nn.py": ["def loss_value_and_grad(model, x, y", "def forward_vjp(self, x):",
                 "06_nn: all checks passed"],
    "07_optim.py": ["Adam's first step moved every parameter by lr * g / (|g| + eps), as defined",
                    "07_optim: all checks passed"],
}


def run_gallery_example(name: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, SRCGRAD_QUICK="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    # The matrices are small (64 x 1000 at most): one BLAS thread is as fast, and a
    # threaded BLAS on a busy CI machine can be a hundred times slower.
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(variable, "1")
    return subprocess.run([sys.executable, str(ROOT / "examples" / name), "--quick"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def _report(result: subprocess.CompletedProcess) -> str:
    return f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"


@pytest.mark.parametrize("name", GALLERY)
def test_gallery_example_quick(name):
    result = run_gallery_example(name)
    assert result.returncode == 0, _report(result)
    for line in GALLERY[name]:
        assert line in result.stdout, f"{line!r} missing\n" + _report(result)


def test_gallery_gpu_example_runs_or_says_why_not():
    """02 trains on the GPU where srcgrad's CuPy backend, CuPy and a GPU all are;
    elsewhere it says which is missing and exits 0."""
    result = run_gallery_example("02_numpy_gpu.py")
    assert result.returncode == 0, _report(result)
    assert "srcgrad's CuPy backend: " in result.stdout, _report(result)
    assert ("02_numpy_gpu: all checks passed" in result.stdout
            or "skipped: this example needs " in result.stdout), _report(result)


# ---- the gallery, examples 08-14 -----------------------------------------------
# Each writes its generated gradient code (and 12, 13 a plot) under --out; the
# test checks the exit status, that the code is valid Python holding the
# lines that make the example's point, and the example's closing line.
# name: (modules it needs, {file it writes: line in that file}, lines of stdout)
GALLERY_08_13 = {
    "08_custom_module.py": ((), {"08_custom_module_grad.py": "linear1 = model.linear1"},
                            ["gradient check: srcgrad agrees with finite differences",
                             "08_custom_module: all checks passed"]),
    "09_control_flow_weight_sharing.py": (
        (), {"09_control_flow_weight_sharing_grad.py": "for _ in reversed(range("},
        ["at depths 0, 1, 2 and 3", "depths drawn: ", "09_control_flow_weight_sharing: all checks passed"]),
    "10_tensor_basics.py": ((), {"10_tensor_basics_grad.py": "y_bar = y_hook(y_bar)"},
                           ["==== 4. devices ====", "hook: d out / d y arrives as",
                            "10_tensor_basics: all checks passed"]),
    "12_guided_backprop.py": (("sklearn", "matplotlib", "tqdm"),
                              {"12_guided_backprop_grad.py": "h_bar = h_hook(h_bar)",
                               "guided_backprop.png": None},
                              ["gradient check: the plain saliency agrees with finite differences",
                               "12_guided_backprop: all checks passed"]),
    "13_rnn_sequence.py": ((), {"13_rnn_sequence_grad.py": "loop1_stack_local.pop()"},
                           ["gradient check: srcgrad agrees with finite differences",
                            "13_rnn_sequence: all checks passed"]),
    "14_newton_hvp.py": ((), {"14_newton_hvp_code.py": "w2_bar_dot = "},
                         ["H v agrees with central differences of srcgrad.grad", "damped Newton-CG steps",
                          "14_newton_hvp: all checks passed"]),
}


def run_example_quick(name: str, out: Path, timeout: float = 90) -> subprocess.CompletedProcess:
    env = dict(os.environ, SRCGRAD_QUICK="1", MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    # As for 01-07: small matrices, so one BLAS thread, which a busy machine cannot slow down.
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(variable, "1")
    return subprocess.run([sys.executable, str(ROOT / "examples" / name), "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.parametrize("name", GALLERY_08_13)
def test_gallery_08_13_quick(name, tmp_path):
    modules, files, lines = GALLERY_08_13[name]
    for module in modules:
        pytest.importorskip(module)
    result = run_example_quick(name, tmp_path)
    assert result.returncode == 0, _report(result)
    for line in lines:
        assert line in result.stdout, f"{line!r} missing\n" + _report(result)
    for file, expected in files.items():
        path = tmp_path / file
        if expected is None:  # a plot
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", file
            continue
        code = path.read_text()
        compile(code, file, "exec")  # the saved gradient code is valid Python
        assert expected in code, f"{expected!r} missing from {file}:\n{code}"
        assert code.split("\n", 1)[1].split("\n", 1)[0] in result.stdout, "the code is printed too"
    if name == "13_rnn_sequence.py" and "plot: " in result.stdout:  # matplotlib is optional there
        assert (tmp_path / "rnn_sine.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- PyTorch's models: the word-level LSTM, the VAE and the Transformer LM ---------------
# Each is a PyTorch example's model in srcgrad.nn, trained on data that ships with an
# installed package (the LMs: the standard library's docstrings).  The test checks the exit
# status, the generated code (valid Python, one function, the lines that make the point),
# the plot, and that the loss fell: the "A -> B" line each prints.
# name: ({file it writes: line in that file}, lines of stdout, the "A -> B" line's start)
PYTORCH_MODELS = {
    "word_lstm_lm.py": ({"word_lstm_lm_grad.py": "in reversed(range(steps)):", "word_lstm_lm.png": None},
                        ["gradient check: srcgrad agrees with finite differences on every parameter of",
                         "| end of epoch   2 |", "---- text the trained model generates",
                         "word_lstm_lm: all checks passed"],
                        "validation perplexity: "),
    "vae_digits.py": ({"vae_digits_grad.py": "KLD = -0.5 * ", "vae_digits.png": None},
                      ["gradient check: srcgrad agrees with finite differences on every parameter of VAE",
                       "====> Epoch: 20 Average loss:", "vae_digits: all checks passed"],
                      "test loss per image: "),
    "transformer_lm.py": ({"transformer_lm_grad.py": "x = x + self.pe[", "transformer_lm.png": None},
                          ["gradient check: srcgrad agrees with finite differences on every parameter of",
                           "causal mask: changing the last word changes only the last position's prediction",
                           "buffers: ['pos_encoder.pe']", "| end of epoch   2 |",
                           "transformer_lm: all checks passed"],
                          "validation perplexity: "),
}


@pytest.mark.parametrize("name", PYTORCH_MODELS)
def test_pytorch_models_quick(name, tmp_path):
    files, lines, fell = PYTORCH_MODELS[name]
    for module in ("sklearn", "matplotlib"):
        pytest.importorskip(module)
    result = run_example_quick(name, tmp_path)
    assert result.returncode == 0, _report(result)
    for line in lines:
        assert line in result.stdout, f"{line!r} missing\n" + _report(result)
    for file, expected in files.items():
        path = tmp_path / file
        if expected is None:  # a plot
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", file
            continue
        code = path.read_text()
        compile(code, file, "exec")  # the saved gradient code is valid Python
        assert expected in code, f"{expected!r} missing from {file}"
        # One function, the model and its layers inlined (the Transformer's activation, a
        # function held in a field, is compiled when it runs: its code follows, so headed).
        assert code.split("# ---- called when it runs: ")[0].count("\ndef ") == 1, file
        assert f"generated gradient code: {path}" in result.stdout
    # The loss fell: "validation perplexity: 1472.6 -> 225.2 after 2 epochs".
    reported = next(line for line in result.stdout.splitlines() if line.startswith(fell))
    before, after = (float(v) for v in reported[len(fell):].split(" after")[0].split(" -> "))
    assert after < 0.8 * before, reported
