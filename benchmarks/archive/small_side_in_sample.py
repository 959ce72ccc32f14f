"""The shipped profile on its own calibration GEMMs (in-sample) by smallest side: the small sides are missed even where fitted (RESULTS, fourteenth freeze).

PYTHONPATH=src:benchmarks python benchmarks/archive/small_side_in_sample.py    (from the repository root, on the CPU)
"""
import sys, json
sys.path.insert(0,'benchmarks')
import numpy as np
from refit_profile import averaged, rows_from_export
from shapewise.profile import find, cost_model
from shapewise.cost import predict_gemm
shipped=find('h200')
rows=averaged([rows_from_export(p) for p in shipped.fit['refitted_from']])
g=[(c,r) for c,r in rows if c.bench in ('gemm','bmm') and r['error'] is None and r['median_ms']]
m,n,k,b=(np.array([c.params[d] for c,_ in g]) for d in ('m','n','k','batch'))
lay=np.array([c.params['layout'] for c,_ in g]); meas=np.array([r['median_ms'] for _,r in g])
pred=np.asarray(predict_gemm(m,n,k,batch=b,layout=lay,gpu=cost_model('h200')).time_ms)
e=np.abs(pred/meas-1); low=np.minimum(np.minimum(m,n),k)
for kind,ch in (('gemm',b==1),('bmm',b>1)):
    for lab,w in (('side 1',low==1),('2-16',(low>1)&(low<=16)),('17-31',(low>16)&(low<32)),('32+',low>=32)):
        s=ch&w
        print(kind,lab,s.sum(),f"{np.median(e[s]):.1%} {np.percentile(e[s],90):.1%}")
