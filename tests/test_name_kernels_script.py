"""benchmarks/name_kernels.py: it keeps the misaligned GEMMs of calibration's draws, each once, and a bad
draw is a one-line error."""

import importlib.util
import subprocess
import sys
from pathlib import Path

from shapewise.cases import is_gemm
from shapewise.cost import align_classes
from shapewise.draws import drawn_beside

ROOT = Path(__file__).parents[1]
spec = importlib.util.spec_from_file_location("name_kernels", ROOT / "benchmarks" / "name_kernels.py")
names = importlib.util.module_from_spec(spec)
spec.loader.exec_module(names)


def test_it_keeps_the_misaligned_gemms_of_the_draws_once_each():
    kept = names.misaligned([("batched", 10), ("batched", 10), ("extended", 10)])
    assert len({c.key for c in kept}) == len(kept) > 1000
    drawn = [c for d in ("batched", "extended") for c in drawn_beside(**{d: 10}) if is_gemm(c)]
    wanted = {c.key for c in drawn if max(align_classes(c.params["m"], c.params["n"], c.params["k"], c.params["layout"],
                                                         "bf16", 16)) > 0}
    assert {c.key for c in kept} == wanted and len(wanted) < len({c.key for c in drawn})


def test_a_bad_draw_is_a_one_line_error(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/name_kernels.py", "--draw", "nope:1", "--db", str(tmp_path / "s.db")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "give NAME:SEED" in done.stderr and "Traceback" not in done.stderr
