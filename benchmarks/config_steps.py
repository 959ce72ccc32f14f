"""The predicted H200 training step of the later configs (tests/data/hf-later/) whose reading changed:
run once with this checkout and once with an older one to see what a misreading cost.

python benchmarks/config_steps.py                                  (on the CPU; seconds)
PYTHONPATH=<a checkout of fa8e9e6>/src python benchmarks/config_steps.py    (as read before)
"""

import contextlib
import io
from pathlib import Path

from shapewise import Workload, predict_step
from shapewise.hf import load_config

LATER = Path(__file__).resolve().parent.parent / "tests" / "data" / "hf-later"
# (config, micro-batch, sequence): the lengths where a window or a layout shows
CASES = [("llama-4-maverick-17b-128e-instruct-fp8", 4, 2048), ("llama-4-scout-17b-16e", 4, 2048),
         ("gpt-oss-20b", 4, 8192), ("exaone-4.0-32b", 1, 32768), ("olmo-3.1-32b-instruct", 1, 32768),
         ("glm-4-9b", 4, 2048), ("kimi-k2-instruct", 4, 2048), ("qwen-7b", 4, 2048)]


def main() -> int:
    for name, batch, seq in CASES:
        with contextlib.redirect_stderr(io.StringIO()):  # the readers' warnings, old and new, are not the figure
            shape = load_config(LATER / f"{name}.json")
            step = predict_step(shape, Workload(batch=batch, seq=seq), gpu="h200")
        print(f"{name:40s} b{batch} s{seq:<6d} {shape.params / 1e9:8.2f}B params  step {step.time_ms:9.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
