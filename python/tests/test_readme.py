"""The README's Python example runs as shown (as tests/einsum.rs does for the Rust one)."""

import os
import re

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def test_readme_python_example_runs():
    text = open(README, encoding="utf-8").read()
    section = text[text.index("\n## Python\n"):]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    scope = {}
    exec(compile(block, "README.md (## Python)", "exec"), scope)
    np, A, x = scope["np"], scope["A"], scope["x"]
    want = A.to_scipy() @ np.ones(1000)
    np.testing.assert_allclose(scope["y"].to_numpy(), want)
    np.testing.assert_allclose(scope["y2"].to_numpy(), want)
    np.testing.assert_allclose(scope["y3"].to_numpy(), 2 * want)
    assert len(scope["kernels"]) == 1
