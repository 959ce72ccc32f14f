"""The figures of the fresh judgements (benchmarks/RESULTS.md, "judged once after the edges"): seeds
drawn after the cost model and the shipped H200 profile were frozen, measured on two H200s, from the
committed exports in results/h200-judges-fresh/: wide seeds 21 and 22, attention seed 21 and models
seed 4 over every corpus config on the first; wide 21 and attention 21 again on the second, with
`calibrate --quick`'s factors (machine-2.json) before and after; and the same cases' spread between
the two machines.

python benchmarks/judge_fresh.py [--freeze 1|2|...|17] [--profile PATH] [--regimes]   (on the CPU; a few minutes)
"""

import argparse
import os
import tempfile

from judge_figures import import_export, measured_rows, print_judged, spread, with_machine_factors

from shapewise.hardware import get_gpu
from shapewise.profile import find, load

R = "benchmarks/results/h200-judges-fresh"
CONFIGS = ["tests/data/hf"]
MEASURED = {"judges.csv.gz": [("wide", 21), ("wide", 22), ("attention", 21), ("models", 4)],
            "judges-2.csv.gz": [("wide", 21), ("attention", 21)]}
# After the gemv pricing was narrowed and the profile refitted (the first freeze's models run had been
# seen), one more run of fresh seeds on a third H200; after the batched draws, decoding by head dim
# and group, and the MoE copies (the third freeze), another.
LATER = {2: ("benchmarks/results/h200-judges-fresh2",
             {"judges.csv.gz": [("wide", 23), ("wide", 24), ("attention", 22), ("models", 5)]}),
         3: ("benchmarks/results/h200-judges-fresh3",
             {"judges.csv.gz": [("wide", 25), ("wide", 26), ("attention", 23), ("models", 6)],
              "judges-2.csv.gz": [("wide", 25)]}),
         # After sliding windows were measured as windows (the fourth freeze): the models set again.
         4: ("benchmarks/results/h200-judges-fresh4", {"judges.csv.gz": [("models", 7)]}),
         # After every case was measured from a settled GPU and the large draws joined (the fifth freeze).
         5: ("benchmarks/results/h200-judges-fresh5",
             {"judges.csv.gz": [("wide", 27), ("attention", 24), ("models", 8)]}),
         # After the skinny draws, cuBLAS's few-row and MAGMA kernels, and vectors classed aligned (the sixth
         # freeze); wide 28 again on a second H200 with `calibrate --quick`'s factors.
         6: ("benchmarks/results/h200-judges-fresh6",
             {"judges.csv.gz": [("wide", 28), ("attention", 25), ("models", 9)], "judges-2.csv.gz": [("wide", 28)]}),
         # After the power cap within one call (the seventh freeze).
         7: ("benchmarks/results/h200-judges-fresh7",
             {"judges.csv.gz": [("wide", 29), ("attention", 26), ("models", 10)]}),
         # After the streams draws, the memory-bound GEMMs' fill and the power cap fitted on calls near peak
         # rate (the eighth freeze).
         8: ("benchmarks/results/h200-judges-fresh8",
             {"judges.csv.gz": [("wide", 30), ("attention", 27), ("models", 11)]}),
         # After decoding attention was priced by the kernel's blocks and steps (the ninth freeze); wide 31
         # again on a second H200 with `calibrate --quick`'s factors.
         9: ("benchmarks/results/h200-judges-fresh9",
             {"judges.csv.gz": [("wide", 31), ("attention", 28), ("models", 12)], "judges-2.csv.gz": [("wide", 31)]}),
         # After decoding attention's split was priced as cuDNN's grids have it (the tenth freeze): the models
         # set, the only one with decoding calls.
         10: ("benchmarks/results/h200-judges-fresh10", {"judges.csv.gz": [("models", 13)]}),
         # After the GEMMs' corrections were learnt as trees (the eleventh freeze): wide and models, each
         # after `calibrate --quick` timed end to end on the same H200; wide 32 again on a second H200.
         11: ("benchmarks/results/h200-judges-fresh11",
              {"judges.csv.gz": [("wide", 32), ("models", 14)], "judges-2.csv.gz": [("wide", 32)]}),
         # After the trees were made to ask only what a kernel sees (the twelfth freeze): wide and models.
         12: ("benchmarks/results/h200-judges-fresh12", {"judges.csv.gz": [("wide", 33), ("models", 15)]}),
         # After the heads, rows and more batched, skinny and edge draws, and the backward's key blocks by head
         # dim (the thirteenth freeze): wide, attention and models.
         13: ("benchmarks/results/h200-judges-fresh13",
              {"judges.csv.gz": [("wide", 34), ("attention", 29), ("models", 16)]}),
         # After sliding windows priced as FlexAttention's programs and a second H200's heads and rows
         # draws (the fourteenth freeze): wide, attention and models.
         14: ("benchmarks/results/h200-judges-fresh14",
              {"judges.csv.gz": [("wide", 35), ("attention", 30), ("models", 17)]}),
         # After a memory-bound stream's fill (the fifteenth freeze): wide, attention and models.
         15: ("benchmarks/results/h200-judges-fresh15",
              {"judges.csv.gz": [("wide", 36), ("attention", 31), ("models", 18)]}),
         # After the prefill draws (the sixteenth freeze), measured blind before the refit: wide, attention and models.
         16: ("benchmarks/results/h200-judges-fresh16",
              {"judges.csv.gz": [("wide", 37), ("attention", 32), ("models", 19)]}),
         # After the one-row walk (the seventeenth freeze: the fifteenth's profile, the walk in the code), on
         # an H200 after `calibrate --quick` timed there: wide and models (cut at its 200 s).
         17: ("benchmarks/results/h200-judges-fresh17", {"judges.csv.gz": [("wide", 38), ("models", 22)]})}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", help="the profile to judge (default: the shipped H200 profile)")
    ap.add_argument("--regimes", action="store_true", help="every regime's line, not only the kinds'")
    ap.add_argument("--freeze", type=int, choices=(1, *LATER), default=1,
                    help="which freeze's run: 1 (results/h200-judges-fresh/), 2 (-fresh2/: wide 23, 24; attention 22; "
                         "models 5), 3 (-fresh3/: wide 25, 26; attention 23; models 6), 4 (-fresh4/: models 7) or "
                         "5 (-fresh5/: wide 27; attention 24; models 8), 6 (-fresh6/: wide 28, on two H200s; attention 25; "
                         "models 9), 7 (-fresh7/: wide 29; attention 26; models 10), 8 (-fresh8/: wide 30; attention 27; "
                         "models 11), 9 (-fresh9/: wide 31, on two H200s; attention 28; models 12), 10 (-fresh10/: models 13) or "
                         "11 (-fresh11/: wide 32, on two H200s; models 14), 12 (-fresh12/: wide 33; models 15) or "
                         "13 (-fresh13/: wide 34; attention 29; models 16) or 14 (-fresh14/: wide 35; attention 30; models 17) "
                         "or 15 (-fresh15/: wide 36; attention 31; models 18) or 16 (-fresh16/: wide 37; attention 32; models 19) "
                         "or 17 (-fresh17/: wide 38; models 22)")
    args = ap.parse_args()
    folder, measured = LATER.get(args.freeze, (R, MEASURED))
    gpu = get_gpu("h200")
    shipped = load(args.profile) if args.profile else find(gpu)
    machine = next((f"{folder}/{name}" for name in ("machine-2.json", "machine-2.json.gz")
                    if os.path.exists(f"{folder}/{name}")), None)
    on_second = with_machine_factors(shipped, machine) if "judges-2.csv.gz" in measured else None
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {}
        for export in measured:
            dbs[export] = f"{tmp}/{export}.db"
            import_export(f"{folder}/{export}", dbs[export])
        for export, sets in measured.items():
            for name, seed in sets:
                drawn, rows = measured_rows(dbs[export], name, seed, CONFIGS)
                print_judged(f"{export} {name} seed {seed}", drawn, rows, gpu=gpu, profile=shipped, regimes=args.regimes,
                             on_second=on_second if export == "judges-2.csv.gz" else None)
        if on_second is None:
            return 0
        print("== the same cases on the two H200s (second / first, median of each case's times)")
        for name, seed in measured["judges-2.csv.gz"]:
            print(spread(name, measured_rows(dbs["judges.csv.gz"], name, seed, CONFIGS)[1],
                         measured_rows(dbs["judges-2.csv.gz"], name, seed, CONFIGS)[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
