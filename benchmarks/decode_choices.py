"""How decoding attention's structural constants were chosen: the calibration's decoding calls
(the exports the shipped H200 profile was refitted from, each case once) fitted with
fit.fit_flash_memory under each overlap power (params.DECODE_OVERLAP; 32 stands for the larger of
the two) and each occupancy by tile
(params.DECODE_OCCUPANCY), and the sum of squared relative errors each leaves, lowest first.

python benchmarks/decode_choices.py   (on the CPU; about a minute)
"""

import dataclasses
import itertools

import numpy as np
from refit_profile import averaged, rows_from_export

import shapewise.cost as cost
import shapewise.fit as fit
from shapewise.calibrate import decoding_samples
from shapewise.cost import predict_ops
from shapewise.hardware import get_gpu
from shapewise.ops import FLASH, Op
from shapewise.params import SPEC
from shapewise.profile import find

NAMES = ("flash_decode_fixed_ms", "flash_decode_split_ms", "flash_memory_bandwidth", "flash_memory_bandwidth_wide",
         "flash_memory_fill_ms", "flash_memory_fill_mb", "flash_decode_step_ms")


def main() -> int:
    shipped, gpu = find("h200"), get_gpu("h200")
    rows = averaged([rows_from_export(path) for path in shipped.fit["refitted_from"]])
    samples = decoding_samples(rows)
    start = dataclasses.replace(shipped.params, **{n: getattr(SPEC, n) for n in NAMES})  # as a calibration starts
    ops = [Op("attn/flash", "fwd", FLASH, count=1, flops=4 * s["batch"] * s["kv_len"] * s["head_dim"], bytes=int(s["bytes"]),
              m=1, n=s["kv_len"], k=s["head_dim"], batch=s["batch"], groups=s["groups"]) for s in samples]
    measured = np.array([s["time_ms"] for s in samples])
    found = []
    for power, occupancy in itertools.product((2, 3, 4, 6, 32), itertools.product((1, 2, 3), (1, 2), (1, 2))):
        cost.DECODE_OVERLAP = fit.DECODE_OVERLAP = power  # both modules read the constant by name
        cost.DECODE_OCCUPANCY = occupancy
        params = fit.fit_flash_memory(samples, gpu=gpu, params=start)
        model = cost.CostModel(gpu, params)
        predicted = np.array([c.time_ms for c in predict_ops(ops, gpu=model, dtype="bf16")])
        found.append((float(np.sum((predicted / measured - 1) ** 2)), power, occupancy))
    found.sort()
    print(f"{len(samples)} decoding calls of the calibration; sum of squared relative errors after the fit:")
    for sse, power, occupancy in found:
        print(f"  overlap power {power}, occupancy {occupancy}: {sse:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
