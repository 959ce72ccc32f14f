"""Another new user's pass over the command line: what a slip of the user's was met with, said in one
line with exit code 2 and nothing left behind."""

from helpers import run


def one_error(err: str) -> bool:
    return err.count("\n") == 1 and err.startswith("shapewise: error: ")


def test_validate_from_a_store_that_is_not_there_says_so_and_makes_none(capsys, tmp_path):
    missing = tmp_path / "typo.db"
    code, _, err = run(capsys, "validate", "--from-db", "--db", str(missing))
    assert code == 2 and one_error(err) and "no results store at" in err
    assert not missing.exists()
