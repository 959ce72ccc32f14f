"""The README's command examples print what it shows: each `$ shapewise …` line of check's, suggest's,
search's and plan's examples run as a user would (piped, output and warnings together), its lines compared
exactly, but for the seconds a run took; a block that ends in "…" shows the output's first lines."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text()
# Each runs offline and prints the same on any machine but for its timing.
COMMANDS = ["shapewise check gpt2 --gpu h200", "shapewise check gpt3-2.7b --gpu h200 | tail -2",
            "shapewise check falcon-7b --tp 2", "shapewise suggest gpt3-2.7b --gpu h200 --top 3",
            "shapewise search --params 7e9 --top 3",
            "shapewise plan llama3-70b --gpus 1024 --gpu h100 --global-batch 16777216 --seq 8192 --tokens 15e12 "
            "--top 3 --spec-only",
            "shapewise check tests/data/hf-later/llama-4-maverick-17b-128e-instruct-fp8.json"]
TIMING = [(re.compile(r"\d+\.\d+ s\b"), "_ s"), (re.compile(r"\([\d,]+ per second\)"), "(_ per second)")]


def shown(command: str) -> list[str]:
    """The lines the README prints under `$ command`, up to the next command or the block's end."""
    block = re.search(r"\$ " + re.escape(command) + r"\n(.*?)(?=\n\$ |\n```)", README, re.S)
    assert block, f"the README no longer shows `{command}`"
    return block.group(1).splitlines()


def untimed(lines: list[str]) -> list[str]:
    for pattern, text in TIMING:
        lines = [pattern.sub(text, line) for line in lines]
    return lines


@pytest.mark.parametrize("command", COMMANDS)
def test_the_readme_examples_print_what_it_shows(command):
    args, _, tail = command.partition(" | tail -")
    run = subprocess.run([sys.executable, "-m", "shapewise", *args.split()[1:]], cwd=ROOT, capture_output=True,
                         text=True, env={"PATH": "", "COLUMNS": "200", "PYTHONPATH": str(ROOT / "src")})
    # The warnings of a command that warns before it prints come first, as a terminal shows them: search's,
    # and a config file's (read before anything is priced).
    first = "search" in args or args.endswith(".json")
    printed = [line.rstrip() for line in (run.stderr + run.stdout if first else run.stdout + run.stderr).splitlines()]
    if tail:
        printed = printed[-int(tail):]
    readme = shown(command)
    if readme[-1] == "…":
        readme, printed = readme[:-1], printed[:len(readme) - 1]
    assert untimed(printed) == untimed(readme)
