"""The calibration's GEMMs measured twice (two runs or two H200s): their run-to-run spread by smallest side (RESULTS, fourteenth freeze: the wide tails are not noise).

PYTHONPATH=src:benchmarks python benchmarks/archive/small_side_noise.py    (from the repository root, on the CPU)
"""
import sys, itertools
sys.path.insert(0,'benchmarks')
import numpy as np
from refit_profile import rows_from_export
from shapewise.profile import find
shipped=find('h200')
times={}
for p in shipped.fit['refitted_from']:
    for c,r in rows_from_export(p):
        if c.bench in ('gemm','bmm') and r['error'] is None and r['median_ms']:
            times.setdefault(c.key,(c,[]))[1].append(r['median_ms'])
rat=[];low=[];kind=[];t=[]
for key,(c,v) in times.items():
    if len(v)>=2:
        rat.append(abs(v[1]/v[0]-1)); p=c.params; low.append(min(p['m'],p['n'],p['k'])); kind.append(p['batch']>1); t.append(v[0])
rat,low,kind,t=map(np.array,(rat,low,kind,t))
print(len(rat),'cases measured twice')
for kd,ch in (('gemm',~kind),('bmm',kind)):
    for lab,w in (('side 1',low==1),('2-16',(low>1)&(low<=16)),('17-31',(low>16)&(low<32)),('32+',low>=32)):
        s=ch&w
        if s.sum(): print(kd,lab,s.sum(),f"run-to-run |ratio-1| median {np.median(rat[s]):.1%} p90 {np.percentile(rat[s],90):.1%}")
