"""search says why no shape of its grid fits: the vocabulary's tables, the tensor-parallel split, or the
budget itself, each in one line that names the flag to change."""

import pytest

from helpers import run


@pytest.mark.parametrize("flags, said", [
    (("--params", "1e3"), "a vocabulary of 32,000 alone takes 16,384,000 at hidden 256"),
    (("--params", "7e9", "--vocab", "10000000"), "a vocabulary of 10,000,000 takes 5,120,000,000 of them"),
    (("--params", "7e9", "--tp", "1000"), "splits its heads, kv heads and FFN width 1000 ways (--tp 1000): give a smaller --tp"),
    (("--params", "1e15"), "within 0.05 of 1e+15 parameters: widen --params-tol or change --params"),
])
def test_search_says_why_nothing_fits(capsys, flags, said):
    code, out, err = run(capsys, "search", *flags)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and said in err
