"""One- and two-row "nt" GEMMs of 256-4096 outputs and K of 1024-8192: the calibration's (random dims) against the models sets' (real models' dims, seen), and the worst of each (RESULTS, fourteenth freeze: the one-row GEMMs' gap, the --shards draw).

PYTHONPATH=src:benchmarks python benchmarks/archive/one_row_gemms.py    (from the repository root, on the CPU)
"""
import sys
sys.path.insert(0,'benchmarks')
import numpy as np
from refit_profile import averaged, rows_from_export
from shapewise.profile import find, cost_model
from shapewise.cost import predict_gemm
from few_blocks import measured_ops
shipped=find('h200'); model=cost_model('h200')
rows=averaged([rows_from_export(p) for p in shipped.fit['refitted_from']])
g=[(c.params,r['median_ms']) for c,r in rows if c.bench=='gemm' and r['error'] is None and r['median_ms'] and c.params['m']<=2 and c.params['layout']=='nt' and 256<=c.params['n']<=4096 and 1024<=c.params['k']<=8192]
def ev(g,label):
    m,n,k=(np.array([p[d] for p,_ in g]) for d in ('m','n','k')); meas=np.array([t for _,t in g])
    pred=np.asarray(predict_gemm(m,n,k,layout='nt',gpu=model).time_ms); e=pred/meas-1
    print(label, len(g), f"median |e| {np.median(abs(e)):.1%} p90 {np.percentile(abs(e),90):.1%} signed {np.median(e):+.1%}")
    for i in np.argsort(-abs(e))[:8]: print('   ',m[i],n[i],k[i],f"{meas[i]*1000:.1f}us {pred[i]*1000:.1f}us {e[i]:+.0%}")
ev(g,'calibration m<=2 nt n 256-4096 k 1024-8192')
s=[(p,float(r['median_ms'])) for p,r in measured_ops('gemm') if p['m']<=2 and p.get('layout')=='nt' and 256<=p['n']<=4096 and 1024<=p['k']<=8192 and p.get('batch',1)==1]
ev(s,'models sets (seen)')
