"""Shared by the command-line tests."""

from shapewise.cli import main


def run(capsys, *argv):
    """Exit code, stdout and stderr of one command; argparse's own exits count as exit codes."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err
