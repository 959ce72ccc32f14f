"""Decoding attention refitted (fit_flash_memory) with another overlap power for the calls whose blocks all run at once, one an SM (3 elsewhere): the calibration's squared relative error and the seen models sets' decoding calls, by blocks. Run with 3, 4, 6, 8 or 32 (RESULTS, fourteenth freeze, "Left as found"; not kept).

PYTHONPATH=src:benchmarks python benchmarks/archive/decode_one_wave.py POWER   (from the repository root, on the CPU)
"""
import sys, dataclasses
sys.path.insert(0,'benchmarks')
import numpy as np
from refit_profile import averaged, rows_from_export
import shapewise.cost as cost
import shapewise.fit as fit
from shapewise.calibrate import decoding_samples
from shapewise.hardware import get_gpu
from shapewise.ops import FLASH, Op
from shapewise.profile import find, CostModel
from few_blocks import measured_ops
from shapewise.cases import op_from_case
ONE = float(sys.argv[1]) if len(sys.argv)>1 else 3
shipped, gpu = find("h200"), get_gpu("h200")
rows = averaged([rows_from_export(path) for path in shipped.fit["refitted_from"]])
samples = decoding_samples(rows)
orig_terms = cost.decode_terms
def power_of(op):
    L = cost.decode_blocks(op, gpu.num_sms)
    waves = -(-L['blocks']*L['splits'] // (gpu.num_sms*cost.DECODE_OCCUPANCY[L['tile']]))
    one = L['blocks']*L['splits'] <= gpu.num_sms
    return ONE if one else 3.0
def busy(stream, walk, power=None):
    p = CUR if power is None else power
    return (stream ** p + walk ** p) ** (1 / p)
# patch: compute per-op power through a global set before each call
ops = [Op("attn/flash", "fwd", FLASH, count=1, flops=0, bytes=int(s["bytes"]), m=1, n=s["kv_len"], k=s["head_dim"], batch=s["batch"], groups=s["groups"]) for s in samples]
P = np.array([power_of(o) for o in ops])
CUR = P
fit.decode_busy_ms = busy
fit.DECODE_OVERLAP = P
params = fit.fit_flash_memory(samples, gpu=gpu, params=shipped.params)
def predict(op, params):
    global CUR
    CUR = power_of(op)
    s,w,f = cost.decode_parts_ms(op, gpu, params)
    return busy(s,w,CUR)+f
meas = np.array([s['time_ms'] for s in samples])
pred = np.array([predict(o, params) for o in ops])
e = pred/meas-1
print('one-wave power', ONE, 'fit SSE', float(np.sum(e**2)), f'median {np.median(abs(e)):.1%} p90 {np.percentile(abs(e),90):.1%}', 'one-wave calls', int((P!=3).sum()) if ONE!=3 else int(sum(power_of(o)==ONE for o in ops)))
pairs=[(p,r) for p,r in measured_ops('flash') if p['m']==1]
sops=[op_from_case(p, flops=float(r['flops'] or 0), nbytes=float(r['bytes'])) for p,r in pairs]
sm=np.array([float(r['median_ms']) for _,r in pairs])
sp=np.array([predict(o, params) for o in sops])
se=sp/sm-1
print(f'seen decode calls {len(se)}: median {np.median(abs(se)):.1%} p90 {np.percentile(abs(se),90):.1%} signed {np.median(se):+.1%}; max {abs(se).max():.1%}')
one=np.array([o.batch//max(o.groups,1)*1 for o in sops])
print({k:getattr(params,k) for k in ('flash_decode_step_ms','flash_decode_fixed_ms','flash_memory_bandwidth','flash_memory_bandwidth_wide','flash_memory_fill_ms','flash_memory_fill_mb','flash_decode_split_ms')})
L=[cost.decode_blocks(o,gpu.num_sms) for o in sops]
bl=np.array([l['blocks'] for l in L])
for lo,hi in ((1,33),(33,66),(66,133),(133,264),(264,10**6)):
    s=(bl>=lo)&(bl<hi)
    print(f"  seen blocks {lo}-{hi-1}: {s.sum():3d} signed median {np.median(se[s]):+.1%} p10 {np.percentile(se[s],10):+.1%} p90 {np.percentile(se[s],90):+.1%} |e| p90 {np.percentile(abs(se[s]),90):.1%}")
L=[cost.decode_blocks(o,gpu.num_sms) for o in ops]
bl=np.array([l['blocks'] for l in L])
for lo,hi in ((1,33),(33,66),(66,133),(133,264),(264,10**6)):
    s=(bl>=lo)&(bl<hi)
    print(f"  calib blocks {lo}-{hi-1}: {s.sum():3d} signed median {np.median(e[s]):+.1%} p10 {np.percentile(e[s],10):+.1%} p90 {np.percentile(e[s],90):+.1%} |e| median {np.median(abs(e[s])):.1%} p90 {np.percentile(abs(e[s]),90):.1%}")
