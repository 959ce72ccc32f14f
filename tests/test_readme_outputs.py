"""The README's `shapewise check` examples print what it shows: each `$ shapewise …` line of its first
example blocks run as a user would (piped, output and warnings together), its lines compared exactly."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()
# The blocks of check's examples: each command runs offline and prints the same on any machine.
COMMANDS = ["shapewise check gpt2 --gpu h200", "shapewise check gpt3-2.7b --gpu h200 | tail -2",
            "shapewise check falcon-7b --tp 2"]


def shown(command: str) -> list[str]:
    """The lines the README prints under `$ command`, up to the next command or the block's end."""
    block = re.search(r"\$ " + re.escape(command) + r"\n(.*?)(?=\n\$ |\n```)", README, re.S)
    assert block, f"the README no longer shows `{command}`"
    return block.group(1).splitlines()


@pytest.mark.parametrize("command", COMMANDS)
def test_the_readme_check_examples_print_what_it_shows(command):
    args, _, tail = command.partition(" | tail -")
    run = subprocess.run([sys.executable, "-m", "shapewise", *args.split()[1:]], cwd=ROOT, capture_output=True,
                         text=True, env={"PATH": "", "COLUMNS": "200", "PYTHONPATH": str(ROOT / "src")})
    printed = [line.rstrip() for line in (run.stdout + run.stderr).splitlines()]
    if tail:
        printed = printed[-int(tail):]
    assert printed == shown(command)
