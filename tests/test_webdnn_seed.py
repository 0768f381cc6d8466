"""Seed 001 (WebDNN #619) line by line, printouts checked by pattern (axis numbers are
process-wide, so they are read off the first printout), and the README's WebDNN section."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from neonlike.webdnn.graph import (Axis, AxisSemantics, Convolution2d, Order, Variable,
                                   print_with_semantics, run)


def conv_same_ref(x, w):
    """x (N, C, H, W), w (C, K, 3, 3), pad 1, stride 1: cross-correlation."""
    h, wd = x.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    return sum(np.einsum("nchw,ck->nkhw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
               for i in range(3) for j in range(3))


def numbers(text):
    return [int(n) for n in re.findall(r"\?(\d+)", text)]


def test_seed_example_line_by_line(capsys):
    x = Variable([1, 64, 56, 56], Order([Axis(), Axis(), Axis(), Axis()]))
    print(x)
    out = capsys.readouterr().out
    assert re.fullmatch(r"<Variable(\d+) shape=\(1, 64, 56, 56\), order=\[\?\d+, \?\d+, \?\d+, "
                        r"\?\d+\]>\n", out)
    a = numbers(out)[0]                           # ?1 in a fresh process
    assert numbers(out) == [a, a + 1, a + 2, a + 3]
    k = int(re.match(r"<Variable(\d+)", out).group(1))

    w = Variable([64, 256, 3, 3], Order([Axis(), Axis(), Axis(), Axis()]))
    print(w)
    out = capsys.readouterr().out
    assert out == f"<Variable{k + 1} shape=(64, 256, 3, 3), order=[?{a + 4}, ?{a + 5}, " \
                  f"?{a + 6}, ?{a + 7}]>\n"

    w.order.axes[0].unify(x.order.axes[1])
    print(w)
    assert capsys.readouterr().out == f"<Variable{k + 1} shape=(64, 256, 3, 3), order=[" \
                                      f"?{a + 1}, ?{a + 5}, ?{a + 6}, ?{a + 7}]>\n"

    conv2d = Convolution2d(None, ksize=3, pad=1, stride=1,
                           axis_batch_size=x.order.axes[0],
                           axis_in_channel=x.order.axes[1],
                           axis_image_height=x.order.axes[2],
                           axis_image_width=x.order.axes[3],
                           axis_out_channel=w.order.axes[1],
                           axis_kernel_height=w.order.axes[2],
                           axis_kernel_width=w.order.axes[3])   # the seed's x: corrected
    print(conv2d.semantics)
    rows = [("N", "batch size", a), ("C1", "input channel", a + 1),
            ("H", "image height", a + 2), ("W", "image width", a + 3),
            ("C2", "output channel", a + 5), ("R", "kernel height", a + 6),
            ("S", "kernel width", a + 7)]
    assert capsys.readouterr().out == "[\n" + "".join(
        f'<AxisSemantics short_name="{s}", description="{d}", axis=<Axis ?{n}>>,\n'
        for s, d, n in rows) + "]\n"
    assert all(isinstance(row, AxisSemantics) for row in conv2d.semantics)

    y, = conv2d(x, w)
    print(y)
    assert capsys.readouterr().out == f"<Variable{k + 2} shape=(1, 256, 56, 56), order=[" \
                                      f"?{a}, ?{a + 5}, ?{a + 2}, ?{a + 3}]>\n"
    assert y.order == Order([x.order.axes[0], w.order.axes[1], x.order.axes[2],
                             x.order.axes[3]])

    print_with_semantics(y, semantics=conv2d.semantics)
    assert capsys.readouterr().out == \
        f"<Variable{k + 2} shape=(1, 256, 56, 56), order=[N, C2, H, W]>\n"

    another_conv = Convolution2d(None, ksize=3, pad=1, stride=1)
    w2 = Variable([256, 8, 3, 3], Order([None, None, None, None]))
    another_conv(y, w2)
    print_with_semantics(y, semantics=another_conv.semantics)
    assert capsys.readouterr().out == \
        f"<Variable{k + 2} shape=(1, 256, 56, 56), order=[N, C1, H, W]>\n"


def test_seed_graph_runs_on_small_shapes():
    """The seed's graph at a small size, its values against numpy."""
    x = Variable([2, 4, 5, 5], Order([Axis(), Axis(), Axis(), Axis()]))
    w = Variable([4, 3, 3, 3], Order([Axis(), Axis(), Axis(), Axis()]))
    w.order.axes[0].unify(x.order.axes[1])
    y, = Convolution2d(None, ksize=3, pad=1, stride=1, axis_in_channel=x.order.axes[1])(x, w)
    rng = np.random.default_rng(1)
    xa, wa = rng.standard_normal(x.shape), rng.standard_normal(w.shape)
    np.testing.assert_allclose(run(y, {x: xa, w: wa}, dtype=np.float64), conv_same_ref(xa, wa),
                               rtol=1e-10, atol=1e-10)


def test_the_readme_webdnn_example_runs(capsys):
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text.split("## WebDNN graphs", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    code = code.replace("Variable([1, 64, 56, 56]", "Variable([1, 8, 6, 6]").replace(
        "Variable([64, 256, 3, 3]", "Variable([8, 16, 3, 3]").replace(
        "randn(1, 64, 56, 56)", "randn(1, 8, 6, 6)").replace("randn(64, 256, 3, 3)",
                                                              "randn(8, 16, 3, 3)")
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["out"].shape == (1, 16, 6, 6)
    assert capsys.readouterr().out.splitlines()[-1].endswith("order=[N, C2, H, W]>")
