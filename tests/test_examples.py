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

ROOT = Path(__file__).resolve().parent.parent


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
    # It is shown to the user too, and the script reports its own checks.
    assert "def loss_value_and_grad(" in result.stdout
    assert "gradient check: srcgrad agrees with finite differences" in result.stdout
    assert "test accuracy:" in result.stdout
