"""The causal forward refitted (fit_flash) with two blocks an SM at some head dims, each alone at half the SM's rate: the calibration's forwards and the seen models sets' (RESULTS, fourteenth freeze, "Left as found"; not kept: one block an SM fits best).

PYTHONPATH=src:benchmarks python benchmarks/archive/forward_occupancy.py    (from the repository root, on the CPU)
"""
import sys, dataclasses, itertools
sys.path.insert(0,'benchmarks')
import numpy as np
from refit_profile import averaged, rows_from_export
import shapewise.cost as cost
import shapewise.fit as fit
from shapewise.profile import find, cost_model
from shapewise.cases import op_from_case
from shapewise.cost import predict_ops
from few_blocks import measured_ops
shipped=find('h200'); gpu=cost_model('h200').gpu
rows=averaged([rows_from_export(p) for p in shipped.fit['refitted_from']])
attention=[(c,r) for c,r in rows if c.bench=='op' and c.params.get('kind')=='flash' and r.get('error') is None]
flash=[dict(batch=c.params["batch"], seq=c.params["m"], head_dim=c.params["k"], **{"pass": c.params["pass_"]},
            groups=c.params.get("groups", 1), time_ms=r["median_ms"]) for c, r in attention if c.params["causal"] and not c.params.get("window") and c.params['m']>1]
fwd_cal=[(op_from_case(c.params, flops=c.flops, nbytes=c.bytes), r['median_ms']) for c,r in attention if c.params['causal'] and not c.params.get('window') and c.params['m']>1 and c.params['pass_']=='fwd']
seen=[(p,r) for p,r in measured_ops('flash') if p['pass_']=='fwd' and p['m']>1 and not p.get('window')]
seen_ops=[op_from_case(p, flops=float(r['flops'] or 0), nbytes=float(r['bytes'])) for p,r in seen]
seen_meas=np.array([float(r['median_ms']) for _,r in seen])
orig_steps=cost._flash_steps
OCC=[1]
def steps(op, block, overhead, sms):
    s, w, b = orig_steps(op, block, overhead, sms)
    occ=OCC[0]
    if occ==1 or op.pass_!='fwd': return s,w,b
    q_blocks, kv_blocks = -(-op.m // block), -(-op.n // block)
    fill = min(op.m, block) / block
    per_block = np.minimum(kv_blocks - q_blocks + np.arange(1, q_blocks + 1), kv_blocks) if op.causal else np.full(q_blocks, kv_blocks)
    busiest = cost._busiest_sm(tuple(float(x) + overhead for x in per_block[::-1]), op.batch, sms*occ) * occ
    return s, w, busiest*fill
cost._flash_steps=steps
orig_cost=cost._flash_cost
TABLE=[(1,1,1,1)]
def fcost(op, gpu, dtype, p):
    buckets=p.flash_buckets
    i=min(int(np.searchsorted(buckets, op.k)), len(buckets)-1)
    OCC[0]=TABLE[0][i]
    return orig_cost(op,gpu,dtype,p)
cost._flash_cost=fcost; fit._flash_cost=fcost
for table in ((1,1,1,1),(2,1,1,1),(2,2,1,1),(2,2,2,1),(2,2,2,2),(3,2,1,1)):
    TABLE[0]=table
    params=fit.fit_flash(flash, gpu=gpu, dtype='bf16', params=shipped.params)
    m=dataclasses.replace(cost_model('h200'), params=params)
    pe=np.array([fcost(o,gpu,'bf16',params)[0] for o,_ in fwd_cal])/np.array([t for _,t in fwd_cal])-1
    se=np.array([fcost(o,gpu,'bf16',params)[0] for o in seen_ops])/seen_meas-1
    bl=np.array([o.batch*-(-o.m//128) for o in seen_ops])
    reg=' '.join(f"{np.median(se[(bl>=lo)&(bl<=hi)]):+.1%}" for lo,hi in ((1,66),(67,132),(133,264),(265,528),(529,10**9)))
    print(table, f"calib fwd {len(pe)} mean|log| {np.mean(abs(np.log1p(pe))):.4f} {np.median(abs(pe)):.1%}/{np.percentile(abs(pe),90):.1%}; seen fwd {np.median(abs(se)):.1%}/{np.percentile(abs(se),90):.1%} by blocks {reg}; eff {params.flash_fwd} ov {params.flash_overhead_fwd} lat {params.flash_latency_fwd_ms}", flush=True)
