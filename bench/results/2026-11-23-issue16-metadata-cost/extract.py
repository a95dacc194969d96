# Same approach as ../2026-11-23-issue15-layering/extract-long.py, for the six runs here; writes extracted.json.
import json
labels=['before-r1','after-r1','after-r2','before-r2','before-r3','after-r3']
R={}
for l in labels:
    d=json.load(open(f'{l}/results.json'))
    for r in d['runs']:
        k=(r['workload'],r['threads'])
        lat=r['latency_us']; es=r['engine_stats']
        R[(l,)+k]=dict(ops=r['ops_per_sec'],cpu=r.get('cpu_seconds_per_1000_ops'),
            rp99=lat.get('READ',{}).get('p99'),rp999=lat.get('READ',{}).get('p999'),
            up99=lat.get('UPDATE',{}).get('p99'),up999=lat.get('UPDATE',{}).get('p999'),
            ip99=lat.get('INSERT',{}).get('p99'),ip999=lat.get('INSERT',{}).get('p999'),
            elapsed=r['elapsed_secs'],probe=(r['device_probe_iops_before'],r['device_probe_iops_after']),
            devw=r.get('device_bytes_written'),userw=r.get('user_bytes_written'),
            devw_per_user=(r['device_bytes_written']/r['user_bytes_written']) if r.get('device_bytes_written') and r.get('user_bytes_written') else None,
            wamp=es.get('write_amplification'),samp=es.get('space_amplification'),
            cleaner_copied=es.get('cleaner_bytes_copied'),cleaner_segments=es.get('cleaner_segments_cleaned'),
            cleaner_live=es.get('cleaner_live_fraction_avg'),throttled=es.get('throttled_secs'),
            capacity_used=es.get('capacity_used_bytes'),
            hits=es.get('cache_hits'),miss=es.get('cache_misses'),
            rss=r['peak_rss_bytes'],timeline=r.get('timeline'),cmd=d['command'])
json.dump({'|'.join(map(str,k)):v for k,v in R.items()},open('extracted.json','w'),indent=1)
cells=[('load',16),('a',4),('a',16)]
for c in cells:
    for l in labels:
        v=R[(l,)+c]; print(c,l,{k:v[k] for k in v if k not in ('cmd','timeline')})
