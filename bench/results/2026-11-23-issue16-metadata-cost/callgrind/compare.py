#!/usr/bin/env python3
"""Before/after comparison of the callgrind runs. Reads /tmp/cg-LABEL.out (not committed; made by
../run-callgrind.sh) with fn_costs.py / arcs.py logic; writes compare.md."""
import sys, re
sys.path.insert(0, '.')
from arcs import arcs
from collections import defaultdict
RUNS = ['before', 'before-2', 'after', 'after-2']
def fn_costs(path):
    names = {}
    def resolve(v):
        m = re.match(r'\((\d+)\)(?: (.*))?$', v)
        if not m: return v
        if m.group(2) is not None: names[m.group(1)] = m.group(2)
        return names[m.group(1)]
    incl = defaultdict(int); calls = defaultdict(int); total = None
    cur = pend = None; incall = False; n = 0
    for line in open(path, errors='replace'):
        line = line.rstrip('\n')
        if not line or line[0] == '#': continue
        if line.startswith('fn='): cur = resolve(line[3:]); continue
        if line.startswith('cfn='): pend = resolve(line[4:]); continue
        if line.startswith('calls='): n = int(line[6:].split()[0]); incall = True; continue
        if line.startswith('summary:') or line.startswith('totals:'): total = int(line.split()[1]); continue
        if incall and (line[0].isdigit() or line[0] in '+-*'):
            if pend != cur: incl[pend] += int(line.split()[1]); calls[pend] += n
            incall = False
    return total, incl, calls
KS = 'shaledb::kvs::Kvs::single'
CV = 'shaledb::commit::<impl shaledb::engine::Engine>::commit_validated'
MR = 'shaledb::log::head::LogHead::make_room'
AP = 'shaledb::log::head::Appender::append'
CRC = 'crc32c::hw_x86_64::crc32c'
WR = '<shaledb_bench::engines::shaledb::ShaleEngine as shaledb_bench::engine::Engine>::write'
LOADER = 'std::sys::backtrace::__rust_begin_short_backtrace'
WO = 'shaledb_bench::suite::write_outputs'
MF = 'shaledb::manifest::Manifest::record'
D = {}
for r in RUNS:
    total, incl, calls = fn_costs(f'/tmp/cg-{r}.out'); A = arcs(f'/tmp/cg-{r}.out')
    d = {}
    d['Total Ir (whole program)'] = total
    d['Total Ir minus harness report/chart writing (write_outputs)'] = total - incl[WO]
    d['Kvs::single calls (50,000 load inserts + ~25,000 A updates)'] = calls[KS]
    d['Kvs::single inclusive Ir'] = incl[KS]
    d['Kvs::single Ir per call'] = incl[KS] / calls[KS]
    d['commit_validated inclusive Ir'] = incl[CV]
    d['commit_validated Ir per call'] = incl[CV] / calls[CV]
    mr = A[(CV, MR)][1]
    d['make_room called from commit_validated (incl. Ir; includes timing-dependent inline log flushes)'] = mr
    d['Kvs::single minus make_room, Ir per call'] = (incl[KS] - mr) / calls[KS]
    d['commit_validated minus make_room, Ir per call'] = (incl[CV] - mr) / calls[CV]
    d['Appender::append Ir per call'] = A[(CV, AP)][1] / A[(CV, AP)][0]
    d['crc32c called from Appender::append, Ir per call of append'] = A[(AP, CRC)][1] / A[(CV, AP)][0]
    ld = A[(LOADER, WR)]
    d['load phase: bench write wrapper Ir per insert (50,000 inserts)'] = ld[1] / ld[0]
    d['Manifest::record inclusive Ir (whole run)'] = incl.get(MF, 0)
    d['fdatasync calls under valgrind (timing-dependent, see strace table)'] = calls.get('fdatasync', 0)
    D[r] = d
def f(x): return f'{x:,.0f}' if isinstance(x, int) or x > 1e4 else f'{x:,.1f}'
def rel(a, b): return f'{a / b:.4f}' if b else 'n/a'
out = ['| quantity | before | before-2 | after | after-2 | before repeat diff | after repeat diff | after/before (run 1) | after-2/before-2 (run 2) | after/before of means |',
       '|---|---|---|---|---|---|---|---|---|---|']
for k in D['before']:
    v = [D[r][k] for r in RUNS]
    b1, b2, a1, a2 = v
    rd = lambda x, y: f'{(max(x, y) / min(x, y) - 1) * 100:.2f}%' if min(x, y) else 'n/a'
    out.append(f'| {k} | ' + ' | '.join(f(x) for x in v) + f' | {rd(b1, b2)} | {rd(a1, a2)} | {rel(a1, b1)} | {rel(a2, b2)} | {rel(a1 + a2, b1 + b2)} |')
open('compare.md', 'w').write('\n'.join(out) + '\n')
print('\n'.join(out))
