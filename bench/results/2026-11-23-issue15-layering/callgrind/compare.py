#!/usr/bin/env python3
"""Old/new comparison of the callgrind runs, from the *.fn-costs.tsv files written by fn_costs.py.
Inclusive Ir per function (what its callers paid), call count and Ir per call, for the 4 runs."""
import statistics as st
RUNS = ['old', 'old-2', 'new', 'new-2']
# (row label, old symbol, new symbol)
FUNCS = [
 ('bench read wrapper (get path entry)', '<shaledb_bench::engines::shaledb::ShaleEngine as shaledb_bench::engine::Engine>::read', '<shaledb_bench::engines::shaledb::ShaleEngine as shaledb_bench::engine::Engine>::read'),
 ('get', 'shaledb::db::Inner::get', 'shaledb::engine::Engine::get'),
 ('read_value', 'shaledb::db::Inner::read_value', 'shaledb::store::read::<impl shaledb::store::Store>::read_value'),
 ('SegmentFile::read_exact_at', 'shaledb::media::SegmentFile::read_exact_at', 'shaledb::media::file::SegmentFile::read_exact_at'),
 ('PackedMap::get', 'shaledb::index::packed::PackedMap::get', 'shaledb::index::packed::PackedMap::get'),
 ('ValueCache::get', 'shaledb::cache::ValueCache::get', 'shaledb::cache::ValueCache::get'),
 ('bench write wrapper (commit path entry)', '<shaledb_bench::engines::shaledb::ShaleEngine as shaledb_bench::engine::Engine>::write', '<shaledb_bench::engines::shaledb::ShaleEngine as shaledb_bench::engine::Engine>::write'),
 ('Kvs::single', 'shaledb::db::Kvs::single', 'shaledb::kvs::Kvs::single'),
 ('commit_validated', 'shaledb::db::Inner::commit_validated', 'shaledb::commit::<impl shaledb::engine::Engine>::commit_validated'),
 ('KvsIndex::put', 'shaledb::index::KvsIndex::put', 'shaledb::index::kvs_index::KvsIndex::put'),
 ('PackedMap::insert', 'shaledb::index::packed::PackedMap::insert', 'shaledb::index::packed::PackedMap::insert'),
 ('ValueCache::insert', 'shaledb::cache::ValueCache::insert', 'shaledb::cache::ValueCache::insert'),
 ('record::encode', 'shaledb::record::encode', 'shaledb::record::encode'),
 ('LogHead::flush_locked (all callers)', 'shaledb::log::LogHead::flush_locked', 'shaledb::log::head::LogHead::flush_locked'),
 ('open (3x: load, A, C)', 'shaledb_bench::engines::shaledb::ShaleEngine::open', 'shaledb_bench::engines::shaledb::ShaleEngine::open'),
 ('recovery::recover', 'shaledb::recovery::recover', 'shaledb::recovery::recover'),
 ('checkpoint write (at close)', 'shaledb::checkpoint::<impl shaledb::db::Inner>::write_checkpoint', 'shaledb::checkpointer::Checkpointer::write'),
 ('GC segment cleaning (background)', 'shaledb::gc::clean_segment', 'shaledb::gc::Cleaner::clean_segment'),
 ('harness: RecordShape::build', 'shaledb_bench::ycsb::workload::RecordShape::build', 'shaledb_bench::ycsb::workload::RecordShape::build'),
 ('harness: write_outputs (report, charts)', 'shaledb_bench::suite::write_outputs', 'shaledb_bench::suite::write_outputs'),
]
def load(run):
    d = {}; tot = None
    for line in open(f'{run}.fn-costs.tsv'):
        if line.startswith('#'):
            tot = int(line.split()[3].rstrip(';')); continue
        i, s, n, f = line.rstrip('\n').split('\t', 3)
        d[f] = (int(i), int(s), int(n))
    return tot, d
T = {}; D = {}
for r in RUNS: T[r], D[r] = load(r)
def get(r, sym): return D[r].get(sym, (0, 0, 0))
print('| Ir | old | old-2 | new | new-2 | old repeat diff | new repeat diff | new/old (run 1) | new/old (run 2) | new/old of means |')
print('|---|---|---|---|---|---|---|---|---|---|')
def row(name, vals):
    o1, o2, n1, n2 = vals
    rd = lambda a, b: f'{(max(a,b)/min(a,b)-1)*100:.2f}%' if min(a, b) else 'n/a'
    rt = lambda a, b: f'{a/b:.4f}' if b else 'n/a'
    print(f'| {name} | {o1:,} | {o2:,} | {n1:,} | {n2:,} | {rd(o1,o2)} | {rd(n1,n2)} | {rt(n1,o1)} | {rt(n2,o2)} | {rt(n1+n2,o1+o2)} |')
row('**program total**', [T[r] for r in RUNS])
gc = [get(r, FUNCS[-3][1 if r.startswith('old') else 2])[0] for r in RUNS]
wo = [get(r, FUNCS[-1][1 if r.startswith('old') else 2])[0] for r in RUNS]
row('total minus GC cleaning and report/chart writing', [T[r] - g - w for r, g, w in zip(RUNS, gc, wo)])
print()
print('| function (old symbol / new symbol) | | old | old-2 | new | new-2 | old repeat diff | new repeat diff | new/old (run 1) | new/old (run 2) | new/old of means |')
print('|---|---|---|---|---|---|---|---|---|---|---|')
for name, os_, ns in FUNCS:
    v = [get(r, os_ if r.startswith('old') else ns) for r in RUNS]
    incl = [x[0] for x in v]; calls = [x[2] for x in v]
    pc = [x[0] / x[2] if x[2] else 0 for x in v]
    rd = lambda a, b: f'{(max(a,b)/min(a,b)-1)*100:.2f}%' if min(a, b) else 'n/a'
    rt = lambda a, b: f'{a/b:.4f}' if b else 'n/a'
    print(f'| {name} | incl. Ir | {incl[0]:,} | {incl[1]:,} | {incl[2]:,} | {incl[3]:,} | {rd(incl[0],incl[1])} | {rd(incl[2],incl[3])} | {rt(incl[2],incl[0])} | {rt(incl[3],incl[1])} | {rt(incl[2]+incl[3],incl[0]+incl[1])} |')
    print(f'| | calls | {calls[0]:,} | {calls[1]:,} | {calls[2]:,} | {calls[3]:,} | | | | | |')
    print(f'| | Ir/call | {pc[0]:,.0f} | {pc[1]:,.0f} | {pc[2]:,.0f} | {pc[3]:,.0f} | {rd(pc[0],pc[1])} | {rd(pc[2],pc[3])} | {rt(pc[2],pc[0])} | {rt(pc[3],pc[1])} | {rt(pc[2]+pc[3],pc[0]+pc[1])} |')

# Derived: the commit path without the log-buffer make_room call. make_room occasionally flushes the
# log head synchronously (when the background flusher has not emptied the buffer yet), which is
# timing-dependent; the rest of commit_validated is not.
from arcs import arcs
print()
print('| derived | old | old-2 | new | new-2 | old repeat diff | new repeat diff | new/old (run 1) | new/old (run 2) | new/old of means |')
print('|---|---|---|---|---|---|---|---|---|---|')
cv = {'old': 'shaledb::db::Inner::commit_validated', 'new': 'shaledb::commit::<impl shaledb::engine::Engine>::commit_validated'}
mr = {'old': 'shaledb::log::LogHead::make_room', 'new': 'shaledb::log::head::LogHead::make_room'}
mrl = {'old': 'shaledb::log::LogHead::make_room_locked', 'new': 'shaledb::log::head::LogHead::make_room_locked'}
fl = {'old': 'shaledb::log::LogHead::flush_locked', 'new': 'shaledb::log::head::LogHead::flush_locked'}
R = {k: [] for k in ['cvx', 'cvxpc', 'mrc', 'inl', 'inln', 'fltot']}
for r in RUNS:
    b = 'old' if r.startswith('old') else 'new'; A = arcs(f'{r}.out')
    ncv = get(r, cv[b])[2]
    mr_from_cv = A[(cv[b], mr[b])][1]
    R['cvx'].append(get(r, cv[b])[0] - mr_from_cv)
    R['cvxpc'].append((get(r, cv[b])[0] - mr_from_cv) / ncv)
    R['mrc'].append(mr_from_cv)
    R['inl'].append(A[(mrl[b], fl[b])][1]); R['inln'].append(A[(mrl[b], fl[b])][0])
    R['fltot'].append(get(r, fl[b])[0])
def row2(name, v, fmt='{:,.0f}'):
    o1, o2, n1, n2 = v
    rd = lambda a, b: f'{(max(a,b)/min(a,b)-1)*100:.2f}%' if min(a, b) else 'n/a'
    rt = lambda a, b: f'{a/b:.4f}' if b else 'n/a'
    print(f'| {name} | ' + ' | '.join(fmt.format(x) for x in v) + f' | {rd(o1,o2)} | {rd(n1,n2)} | {rt(n1,o1)} | {rt(n2,o2)} | {rt(n1+n2,o1+o2)} |')
row2('commit_validated incl. Ir minus its make_room calls', R['cvx'])
row2('  same, Ir per commit', R['cvxpc'])
row2('make_room as called from commit_validated (incl. Ir)', R['mrc'])
row2('log flushes done inline in make_room (incl. Ir)', R['inl'])
row2('  number of those inline flushes', R['inln'])
row2('flush_locked, all callers (flusher thread + inline)', R['fltot'])
