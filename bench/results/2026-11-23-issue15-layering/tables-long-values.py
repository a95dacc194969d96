# One table of every run's value per metric for the long runs (rows as in tables-long.py).
import json
exec(open('tables-long.py').read().split("out=[]; summ=[]")[0])  # reuse E, g, rows, fmt
L=['long-old-r1','long-new-r1','long-new-r2','long-old-r2','long-old-r3','long-new-r3']
hdr='| metric | old r1 | new r1 | new r2 | old r2 | old r3 | new r3 |\n|---|---|---|---|---|---|---|'
lines=[hdr]+[f'| {name} | '+' | '.join(fmt(g(l,w,t,m),m) for l in L)+' |' for name,w,t,m,_ in rows]
open('tables-long-values.md','w').write('\n'.join(lines)+'\n'); print('\n'.join(lines))
