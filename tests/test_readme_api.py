"""The README's Python API example runs as printed: each line it prints is the comment under it."""

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def test_the_readme_python_example_prints_what_it_says():
    block = re.search(r"## Python API\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    said = [line[2:].split("   (")[0].strip() for line in block.splitlines() if line.startswith("# ")]
    printed = [line.strip() for line in out.getvalue().splitlines()]
    assert printed == said


def test_every_function_the_readme_names_imports_from_the_package_root():
    import shapewise

    listed = re.search(r"Every function \((.*?)\)", README.read_text(), re.S).group(1)
    names = [n for n in re.findall(r"`(\w+)`", listed)]
    assert {"predict_gemm", "check", "suggest", "search", "verify"} <= set(names)
    for name in names:
        assert callable(getattr(shapewise, name)), name
