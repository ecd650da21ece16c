#!/usr/bin/env python3
"""Summarise /tmp/ptsc-trace-{0,1}.txt (bench_overlap, tag 1): per size, the
median time of each step after rank 0's isend (us), and who did it."""
import sys, statistics as st
d = sys.argv[1] if len(sys.argv) > 1 else '/tmp'
def rounds(rank):
    out, cur = [], None
    for line in open(f'{d}/ptsc-trace-{rank}.txt'):
        ns, w, tag, who, sw = line.split()
        if w == 'B':
            if cur is not None: cur['kib'] = int(tag)
            continue
        if int(tag) != 1: continue
        if w in 'SR':
            cur = {'t': {}, 'who': {}, 'sw': {}}; out.append(cur)
        if cur is None: continue
        cur['t'].setdefault(w, int(ns)); cur['who'].setdefault(w, who); cur['sw'].setdefault(w, int(sw))
    return out
a, b = rounds(0), rounds(1)
n = min(len(a), len(b))
by = {}
for i in range(n):
    s, r = a[i], b[i]
    t0 = s['t']['S']
    row = {}
    for k, v in s['t'].items(): row['s' + k] = (v - t0) / 1e3
    for k, v in r['t'].items(): row['r' + k] = (v - t0) / 1e3
    who = ''.join(f"{k}{s['who'][k]}" for k in 'EPD' if k in s['who']) + '/' + ''.join(f"{k}{r['who'][k]}" for k in 'MIC' if k in r['who'])
    by.setdefault(s.get('kib', -1), []).append((row, who))
order = ['sS', 'rR', 'sE', 'sP', 'rM', 'rI', 'rC', 'sD', 'sW', 'rW', 'sX', 'rX']
print('| KiB | n | ' + ' | '.join(order) + ' | who (last round) |')
print('|---:|---:|' + '---:|' * len(order) + '---|')
for kib in sorted(by):
    rows = by[kib]
    cells = []
    for k in order:
        v = [r[k] for r, _ in rows if k in r]
        cells.append(f'{st.median(v):.1f}' if v else '-')
    print(f'| {kib} | {len(rows)} | ' + ' | '.join(cells) + f' | {rows[-1][1]} |')
