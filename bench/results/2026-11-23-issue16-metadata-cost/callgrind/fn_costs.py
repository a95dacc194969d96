#!/usr/bin/env python3
"""Per-function costs from a callgrind out file (single event Ir), merged over source files
(inlined code included): self Ir, inclusive Ir (= sum of the inclusive cost on all incoming call
arcs from other functions, i.e. what callers paid for calling it) and number of calls.
Usage: fn_costs.py FILE [REGEX]  -> TSV: inclusive, self, calls, name (sorted by inclusive)."""
import re, sys
from collections import defaultdict
names = {}
def resolve(v):
    m = re.match(r'\((\d+)\)(?: (.*))?$', v)
    if not m: return v
    if m.group(2) is not None: names[m.group(1)] = m.group(2)
    return names[m.group(1)]
selfc = defaultdict(int); incl = defaultdict(int); calls = defaultdict(int)
cur = None; pending = None; incall = False; ncalls = 0
total = None
for line in open(sys.argv[1], errors='replace'):
    line = line.rstrip('\n')
    if not line or line[0] == '#': continue
    if line.startswith('fn='):
        cur = resolve(line[3:]); continue
    if line.startswith('cfn='):
        pending = resolve(line[4:]); continue
    if line.startswith('calls='):
        ncalls = int(line[6:].split()[0]); incall = True; continue
    if line.startswith('summary:') or line.startswith('totals:'):
        total = int(line.split()[1]); continue
    c = line[0]
    if c.isdigit() or c in '+-*':
        parts = line.split()
        cost = int(parts[1]) if len(parts) > 1 else 0
        if incall:
            if pending != cur:
                incl[pending] += cost; calls[pending] += ncalls
            incall = False; pending = None
        else:
            selfc[cur] += cost
        continue
    # other spec lines (fl=, fi=, fe=, ob=, cob=, cfi=, cfl=, ...) do not change the function
rx = re.compile(sys.argv[2]) if len(sys.argv) > 2 else None
print(f'# total Ir {total}; sum of self {sum(selfc.values())}')
rows = [(incl.get(f, 0), selfc.get(f, 0), calls.get(f, 0), f) for f in set(selfc) | set(incl)]
rows.sort(reverse=True)
for i, s, n, f in rows:
    if rx is None or rx.search(f):
        print(f'{i}\t{s}\t{n}\t{f}')
