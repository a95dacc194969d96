#!/usr/bin/env python3
"""Call arcs of a callgrind out file: inclusive Ir and call count per (caller, callee).
Usage: arcs.py FILE REGEX callers|callees   (TSV: inclusive Ir, calls, caller -> callee)
Also importable: arcs(FILE) -> {(caller, callee): [calls, inclusive Ir]}."""
import re, sys
from collections import defaultdict
def arcs(path):
    names = {}
    def resolve(v):
        m = re.match(r'\((\d+)\)(?: (.*))?$', v)
        if not m: return v
        if m.group(2) is not None: names[m.group(1)] = m.group(2)
        return names[m.group(1)]
    A = defaultdict(lambda: [0, 0]); cur = pend = None; incall = False; n = 0
    for line in open(path, errors='replace'):
        line = line.rstrip('\n')
        if line.startswith('fn='): cur = resolve(line[3:]); continue
        if line.startswith('cfn='): pend = resolve(line[4:]); continue
        if line.startswith('calls='): n = int(line[6:].split()[0]); incall = True; continue
        if incall and line and (line[0].isdigit() or line[0] in '+-*'):
            a = A[(cur, pend)]; a[0] += n; a[1] += int(line.split()[1]); incall = False
    return A
if __name__ == '__main__':
    rx = re.compile(sys.argv[2]); mode = sys.argv[3]
    for (c, d), (n, i) in sorted(arcs(sys.argv[1]).items(), key=lambda x: -x[1][1]):
        if (mode == 'callers' and rx.search(d)) or (mode == 'callees' and rx.search(c)):
            print(f'{i}\t{n}\t{c} -> {d}')
