# Same approach as ../2026-11-23-issue15-layering/tables-long.py: per-round after/before ratios,
# medians, and each binary's own round-to-round spread. Writes tables-summary.md, tables-detail.md.
import json, statistics as st
E={tuple(k.split('|')):v for k,v in json.load(open('extracted.json')).items()}
def g(l,w,t,m): return E[(l,w,str(t))][m]
rows=[('Load throughput (ops/s, 16 threads)','load',16,'ops','hi'),
('Load insert p99, 16 threads (µs)','load',16,'ip99','lo'),
('A throughput, 4 threads (ops/s)','a',4,'ops','hi'),
('A throughput, 16 threads (ops/s)','a',16,'ops','hi'),
('A read p99, 4 threads (µs)','a',4,'rp99','lo'),
('A read p99, 16 threads (µs)','a',16,'rp99','lo'),
('A update p99, 4 threads (µs)','a',4,'up99','lo'),
('A update p99, 16 threads (µs)','a',16,'up99','lo'),
('CPU s / 1000 ops, load','load',16,'cpu','lo'),
('CPU s / 1000 ops, A 4 threads','a',4,'cpu','lo'),
('CPU s / 1000 ops, A 16 threads','a',16,'cpu','lo'),
('Device bytes written / user byte, load','load',16,'devw_per_user','lo'),
('Device bytes written / user byte, A 4 threads','a',4,'devw_per_user','lo'),
('Device bytes written / user byte, A 16 threads','a',16,'devw_per_user','lo'),
]
def fmt(x,m):
    if m=='ops': return f'{x:,.0f}'
    if m=='cpu': return f'{x*1000:.2f} ms'
    if m=='devw_per_user': return f'{x:.3f}'
    return f'{x:,}'
out=[]; summ=[]
for name,w,t,m,better in rows:
    bef=[g(f'before-r{i}',w,t,m) for i in (1,2,3)]; aft=[g(f'after-r{i}',w,t,m) for i in (1,2,3)]
    rat=[a/b for a,b in zip(aft,bef)]; med=st.median(rat)
    bb=(min(bef)/max(bef), max(bef)/min(bef))
    inside = bb[0]<=med<=bb[1]
    # "worse than 3%": throughput ratio < 0.97, or latency/CPU/bytes ratio > 1.03
    worse3 = med<0.97 if better=='hi' else med>1.03
    out.append(f'### {name}\n\n| round | order | before | after | after/before |\n|---|---|---|---|---|')
    for i,(b,a,r) in enumerate(zip(bef,aft,rat),1):
        order='after then before' if i==2 else 'before then after'
        out.append(f'| {i} | {order} | {fmt(b,m)} | {fmt(a,m)} | {r:.3f} |')
    out.append(f'| **median ratio** | | | | **{med:.3f}** |\n')
    out.append(f'Before across rounds: {fmt(min(bef),m)} to {fmt(max(bef),m)} (max/min {max(bef)/min(bef):.3f}); after: {fmt(min(aft),m)} to {fmt(max(aft),m)} (max/min {max(aft)/min(aft):.3f}). Median ratio {"inside" if inside else "OUTSIDE"} the before binary\'s own band [{bb[0]:.3f}, {bb[1]:.3f}].\n')
    summ.append(f'| {name} | {rat[0]:.3f} | {rat[1]:.3f} | {rat[2]:.3f} | **{med:.3f}** | {"higher" if better=="hi" else "lower"} | {fmt(min(bef),m)} – {fmt(max(bef),m)} ({(max(bef)/min(bef)-1)*100:.1f}%) | {fmt(min(aft),m)} – {fmt(max(aft),m)} ({(max(aft)/min(aft)-1)*100:.1f}%) | [{bb[0]:.3f}, {bb[1]:.3f}] | {"yes" if inside else "**no**"} | {"**yes**" if worse3 else "no"} | {"**yes**" if (worse3 and not inside) else "no"} |')
hdr='| metric | r1 after/before | r2 after/before | r3 after/before | median | better is | before min – max (spread) | after min – max (spread) | before band (min/max, max/min) | median inside before band? | median worse than 3%? | worse than 3% AND outside band? |\n|---|---|---|---|---|---|---|---|---|---|---|---|'
open('tables-summary.md','w').write(hdr+'\n'+'\n'.join(summ)+'\n')
open('tables-detail.md','w').write('\n'.join(out))
# Diagnostics of the A 16-thread phase (cleaner and throttling), per run.
diag=['| run | A16 ops/s | elapsed s | cleaner segments cleaned | cleaner bytes copied | cleaner live fraction avg | throttled s (engine stat) | write amp | space amp | capacity used (GB) |','|---|---|---|---|---|---|---|---|---|---|']
for l in ['before-r1','after-r1','after-r2','before-r2','before-r3','after-r3']:
    v=E[(l,'a','16')]
    diag.append(f"| {l} | {v['ops']:,.0f} | {v['elapsed']:.1f} | {v['cleaner_segments']} | {v['cleaner_copied']:,} | {v['cleaner_live']:.3f} | {v['throttled']:.1f} | {v['wamp']:.3f} | {v['samp']:.3f} | {v['capacity_used']/1e9:.2f} |")
open('tables-a16-cleaner.md','w').write('\n'.join(diag)+'\n')
print(hdr); print('\n'.join(summ)); print(); print('\n'.join(diag))
