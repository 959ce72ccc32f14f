"""The heads and rows draws measured on two H200s (results/h200-draws-2/ and -3/): the second's times over the first's (RESULTS, fourteenth freeze: the small ops' bias is not one machine's).

PYTHONPATH=src:benchmarks python benchmarks/archive/draws_two_machines.py    (from the repository root, on the CPU)
"""
import sys
sys.path.insert(0,'benchmarks')
import numpy as np
from refit_profile import rows_from_export
for kind in ('rows-1','rows-2','heads-1','heads-2'):
    a={c.key:r['median_ms'] for c,r in rows_from_export(f'benchmarks/results/h200-draws-2/calibration-{kind}.csv.gz') if r['median_ms']}
    b={c.key:r['median_ms'] for c,r in rows_from_export(f'benchmarks/results/h200-draws-3/calibration-{kind}.csv.gz') if r['median_ms']}
    common=[k for k in a if k in b]; r=np.array([b[k]/a[k] for k in common])
    print(kind, len(common), f"second/first: median {np.median(r)-1:+.1%} p10 {np.percentile(r,10)-1:+.1%} p90 {np.percentile(r,90)-1:+.1%}")
