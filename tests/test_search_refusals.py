"""search says why no shape of its grid fits: the vocabulary's tables, the tensor-parallel split, or the
budget itself, each in one line that names the flag to change."""

import pytest

from helpers import run


@pytest.mark.parametrize("flags, said", [
    (("--params", "1e3"), "a vocabulary of 32,000 alone takes 16,384,000 at hidden 256"),
    (("--params", "7e9", "--vocab", "10000000"), "a vocabulary of 10,000,000 takes 5,120,000,000 of them"),
    (("--params", "7e9", "--tp", "1000"), "splits its heads, kv heads and FFN width 1000 ways (--tp 1000): give a smaller --tp"),
    (("--params", "1e15"), "1e+15 parameters: its largest has 2.82e+12 parameters; give a smaller --params"),
    (("--params", "4e12"), "within 0.05 of 4e+12 parameters: widen --params-tol or change --params"),
])
def test_search_says_why_nothing_fits(capsys, flags, said):
    code, out, err = run(capsys, "search", *flags)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and said in err


@pytest.mark.parametrize("vocab", ["1", "0", "-3"])
def test_search_refuses_a_vocabulary_of_fewer_than_two_tokens(capsys, vocab):
    """One token leaves nothing to predict; padded to 64 it was priced as a vocabulary no one asked for."""
    code, out, err = run(capsys, "search", "--params", "1e9", "--vocab", vocab)
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert f"--vocab: the vocab size must be a whole number from 2 to 16,777,216 = 2^24, got {vocab}" in err


def test_search_takes_a_vocabulary_of_two_and_the_library_refuses_one():
    from shapewise import Workload, search
    from shapewise.errors import ShapewiseError

    workload = Workload(batch=1, seq=4096)
    assert search(params_target=1e9, gpu="h200", workload=workload, vocab=2, top=1).top[0].shape.vocab == 64
    with pytest.raises(ShapewiseError, match="^vocab: the vocab size must be a whole number from 2 to 16,777,216 = 2\\^24, got 1"):
        search(params_target=1e9, gpu="h200", workload=workload, vocab=1)
