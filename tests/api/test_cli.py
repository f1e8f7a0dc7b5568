"""The command-line tool: ``srcgrad show FILE.py:FUNCTION``."""
from __future__ import annotations

import subprocess
import sys

from srcgrad import cli

MODEL = '''\
import numpy as np

def loss(w1, w2, x, y):
    h = x @ w1
    h_relu = np.maximum(h, 0)
    y_pred = h_relu @ w2
    return np.sum((y_pred - y) ** 2)

class Scaled:
    def __init__(self):
        self.w = np.ones(3)

    def forward(self, x):
        return np.sum(self.w * x)
'''


def test_show_prints_specialised_code(tmp_path, capsys):
    (tmp_path / "model.py").write_text(MODEL)
    assert cli.main(["show", f"{tmp_path}/model.py:loss", "--wrt", "w1,w2",
                     "--ndim", "w1=2,w2=2,x=2,y=2"]) == 0
    out = capsys.readouterr().out
    assert "def loss_grad(w1, w2, x, y, result_bar=1.0):" in out
    assert "w2_bar = h_relu.T @ y_pred_bar" in out


def test_show_a_method_as_vjp(tmp_path, capsys):
    (tmp_path / "model.py").write_text(MODEL)
    cli.main(["show", f"{tmp_path}/model.py:Scaled.forward", "--wrt", "self,x", "--mode", "vjp"])
    out = capsys.readouterr().out
    # Without example arguments `self`'s fields are unknown: `self.w` may be a property,
    # so it is read through dispatch.vjp_field (a plain field's adjoint is then {'w': w_bar}).
    assert "def forward_vjp(self, x):" in out and "dispatch.vjp_field(self, 'w', " in out


def test_help_and_bad_target(tmp_path):
    done = subprocess.run([sys.executable, "-m", "srcgrad", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "srcgrad show" in done.stdout
    done = subprocess.run([sys.executable, "-m", "srcgrad", "show", f"{tmp_path}/missing.py:f"],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "no such file" in done.stderr
