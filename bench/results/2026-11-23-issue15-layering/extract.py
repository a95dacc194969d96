import json, statistics as st
labels=['old-r1','new-r1','new-r2','old-r2','old-r3','new-r3']
R={}
for l in labels:
    d=json.load(open(f'{l}/results.json'))
    for r in d['runs']:
        k=(r['workload'],r['threads'])
        lat=r['latency_us']
        R[(l,)+k]=dict(ops=r['ops_per_sec'],cpu=r.get('cpu_seconds_per_1000_ops'),
            rp99=lat.get('READ',{}).get('p99'),rp999=lat.get('READ',{}).get('p999'),
            up99=lat.get('UPDATE',{}).get('p99'),up999=lat.get('UPDATE',{}).get('p999'),
            ip99=lat.get('INSERT',{}).get('p99'),ip999=lat.get('INSERT',{}).get('p999'),
            elapsed=r['elapsed_secs'],probe=(r['device_probe_iops_before'],r['device_probe_iops_after']),
            hits=r['engine_stats'].get('cache_hits'),miss=r['engine_stats'].get('cache_misses'),
            gdr=r['engine_stats'].get('get_device_reads'),gets=r['engine_stats'].get('gets'),
            rss=r['peak_rss_bytes'],cmd=d['command'])
json.dump({'|'.join(map(str,k)):v for k,v in R.items()},open('extracted.json','w'),indent=1)
cells=[('load',16),('a',4),('a',16),('c',4),('c',16)]
for c in cells:
    for l in labels:
        v=R[(l,)+c]; print(c,l,{k:v[k] for k in v if k!='cmd'})
