import json, statistics as st
E={tuple(k.split('|')):v for k,v in json.load(open('extracted-long.json')).items()}
def g(l,w,t,m): return E[(l,w,str(t))][m]
rows=[('Load throughput (ops/s, 16 threads)','load',16,'ops','hi'),
('A throughput, 4 threads (ops/s)','a',4,'ops','hi'),
('A throughput, 16 threads (ops/s)','a',16,'ops','hi'),
('C throughput, 4 threads (ops/s)','c',4,'ops','hi'),
('C throughput, 16 threads (ops/s)','c',16,'ops','hi'),
('A read p99, 4 threads (µs)','a',4,'rp99','lo'),
('A read p99.9, 4 threads (µs)','a',4,'rp999','lo'),
('A read p99, 16 threads (µs)','a',16,'rp99','lo'),
('A read p99.9, 16 threads (µs)','a',16,'rp999','lo'),
('A update p99, 4 threads (µs)','a',4,'up99','lo'),
('A update p99, 16 threads (µs)','a',16,'up99','lo'),
('C read p99, 4 threads (µs)','c',4,'rp99','lo'),
('C read p99.9, 4 threads (µs)','c',4,'rp999','lo'),
('C read p99, 16 threads (µs)','c',16,'rp99','lo'),
('C read p99.9, 16 threads (µs)','c',16,'rp999','lo'),
('Load insert p99, 16 threads (µs)','load',16,'ip99','lo'),
('CPU s / 1000 ops, load','load',16,'cpu','lo'),
('CPU s / 1000 ops, A 4 threads','a',4,'cpu','lo'),
('CPU s / 1000 ops, A 16 threads','a',16,'cpu','lo'),
('CPU s / 1000 ops, C 4 threads','c',4,'cpu','lo'),
('CPU s / 1000 ops, C 16 threads','c',16,'cpu','lo'),
]
def fmt(x,m):
    if m=='ops': return f'{x:,.0f}'
    if m=='cpu': return f'{x*1000:.2f} ms'
    return f'{x:,}'
out=[]; summ=[]
for name,w,t,m,better in rows:
    old=[g(f'long-old-r{i}',w,t,m) for i in (1,2,3)]; new=[g(f'long-new-r{i}',w,t,m) for i in (1,2,3)]
    rat=[n/o for n,o in zip(new,old)]; med=st.median(rat)
    ob=(min(old)/max(old), max(old)/min(old)); nb=(min(new)/max(new), max(new)/min(new))
    inside = ob[0]<=med<=ob[1]
    out.append(f'### {name}\n\n| round | order | old | new | new/old |\n|---|---|---|---|---|')
    for i,(o,n,r) in enumerate(zip(old,new,rat),1):
        order='new then old' if i==2 else 'old then new'
        out.append(f'| {i} | {order} | {fmt(o,m)} | {fmt(n,m)} | {r:.3f} |')
    out.append(f'| **median ratio** | | | | **{med:.3f}** |\n')
    out.append(f'Old across rounds: {fmt(min(old),m)} to {fmt(max(old),m)} (max/min {max(old)/min(old):.3f}); new: {fmt(min(new),m)} to {fmt(max(new),m)} (max/min {max(new)/min(new):.3f}). Median ratio {"inside" if inside else "OUTSIDE"} the old binary\'s own band [{ob[0]:.3f}, {ob[1]:.3f}].\n')
    summ.append(f'| {name} | {rat[0]:.3f} | {rat[1]:.3f} | {rat[2]:.3f} | **{med:.3f}** | {"higher" if better=="hi" else "lower"} | {fmt(min(old),m)} – {fmt(max(old),m)} ({(max(old)/min(old)-1)*100:.1f}%) | {fmt(min(new),m)} – {fmt(max(new),m)} ({(max(new)/min(new)-1)*100:.1f}%) | [{ob[0]:.3f}, {ob[1]:.3f}] | {"yes" if inside else "**no**"} |')
hdr='| metric | r1 new/old | r2 new/old | r3 new/old | median | better is | old min – max (spread) | new min – max (spread) | old band (min/max, max/min) | median inside old band? |\n|---|---|---|---|---|---|---|---|---|---|'
open('tables-long-summary.md','w').write(hdr+'\n'+'\n'.join(summ)+'\n')
open('tables-long-detail.md','w').write('\n'.join(out))
print(hdr); print('\n'.join(summ))
