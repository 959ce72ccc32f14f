"""The calibration's GEMMs with a side of 16 or less by the cuBLAS kernels they ran (the kernel census), the shipped profile's error on each family (in-sample).

PYTHONPATH=src:benchmarks python benchmarks/archive/small_side_kernels.py    (from the repository root, on the CPU)
"""
import sys, csv, json, re, collections
sys.path.insert(0,'benchmarks')
import numpy as np
from refit_profile import averaged, rows_from_export
from shapewise.exports import open_export
from shapewise.profile import find, cost_model
from shapewise.cost import predict_gemm
shipped=find('h200')
kern={}
for p in shipped.fit['kernels_from']:
    with open_export(p) as f:
        for r in csv.DictReader(f): kern.setdefault(r['key'], r['kernels'])
rows=averaged([rows_from_export(p) for p in shipped.fit['refitted_from']])
g=[(c,r) for c,r in rows if c.bench in ('gemm','bmm') and r['error'] is None and r['median_ms'] and c.key in kern]
m,n,k,b=(np.array([c.params[d] for c,_ in g]) for d in ('m','n','k','batch'))
lay=np.array([c.params['layout'] for c,_ in g]); meas=np.array([r['median_ms'] for _,r in g])
pred=np.asarray(predict_gemm(m,n,k,batch=b,layout=lay,gpu=cost_model('h200')).time_ms)
e=pred/meas-1
low=np.minimum(np.minimum(m,n),k)
def fam(name):
    first=name.split(';')[0] if ';' in name else name.split('|')[0]
    mm=re.search(r'(gemv\w*|gemmSN\w*|gemmk1\w*|splitKreduce\w*|sm90_xmma\w{0,20}|cutlass\w{0,30}|ampere\w{0,20}|sm80\w{0,20}|dot_kernel|reduce_1Block\w*)', name)
    return mm.group(1)[:28] if mm else first[:28]
grp=collections.defaultdict(list)
for i,(c,_) in enumerate(g):
    if low[i]<=16:
        names=kern[c.key]
        fams='+'.join(sorted({fam(x) for x in re.split(r'[;|]', names) if x.strip()}))[:70]
        grp[fams].append(e[i])
for f,v in sorted(grp.items(), key=lambda x:-len(x[1]))[:25]:
    v=np.array(v); print(f"{len(v):5d} {np.median(abs(v)):.1%} {np.percentile(abs(v),90):.1%} {np.median(v):+.1%}  {f}")
print(list(kern.values())[0][:300])
