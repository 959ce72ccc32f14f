"""Decoding attention's signed error by its blocks (key heads × sequences) and its walk against its stream, for the calibration's decoding calls (fitted) and the models sets' (seen): the 66-132 block regime, no split, one block an SM, comes out slow in both (RESULTS, fourteenth freeze, "Left as found").

PYTHONPATH=src:benchmarks python benchmarks/archive/decode_regimes.py    (from the repository root, on the CPU)
"""
import sys
sys.path.insert(0,'benchmarks')
import numpy as np
from refit_profile import averaged, rows_from_export
import shapewise.cost as cost
from shapewise.calibrate import decoding_samples
from shapewise.hardware import get_gpu
from shapewise.ops import FLASH, Op
from shapewise.profile import find
from few_blocks import measured_ops
from shapewise.cases import op_from_case
shipped, gpu = find("h200"), get_gpu("h200")
rows = averaged([rows_from_export(path) for path in shipped.fit["refitted_from"]])
samples = decoding_samples(rows)
ops = [Op("attn/flash", "fwd", FLASH, count=1, flops=0, bytes=int(s["bytes"]), m=1, n=s["kv_len"], k=s["head_dim"], batch=s["batch"], groups=s["groups"]) for s in samples]
meas=np.array([s['time_ms'] for s in samples])
def pred(o):
    s,w,f=cost.decode_parts_ms(o,gpu,shipped.params); return cost.decode_busy_ms(s,w)+f, s, w
def report(name, ops, meas):
    P=np.array([pred(o) for o in ops]); e=P[:,0]/meas-1
    L=[cost.decode_blocks(o,gpu.num_sms) for o in ops]
    bl=np.array([l['blocks'] for l in L]); sp=np.array([l['splits'] for l in L]); ratio=P[:,2]/P[:,1]
    print(name)
    for lo,hi in ((1,33),(33,66),(66,133),(133,264),(264,10**6)):
        s=(bl>=lo)&(bl<hi)
        for r0,r1 in ((0,0.3),(0.3,0.6),(0.6,10)):
            t=s&(ratio>=r0)&(ratio<r1)
            if t.sum(): print(f"  blocks {lo}-{hi-1} walk/stream {r0}-{r1}: {t.sum():3d} signed median {np.median(e[t]):+.1%} p10 {np.percentile(e[t],10):+.1%} p90 {np.percentile(e[t],90):+.1%}")
report('calibration (fitted)', ops, meas)
pairs=[(p,r) for p,r in measured_ops('flash') if p['m']==1]
sops=[op_from_case(p, flops=float(r['flops'] or 0), nbytes=float(r['bytes'])) for p,r in pairs]
report('models sets (seen)', sops, np.array([float(r['median_ms']) for _,r in pairs]))
