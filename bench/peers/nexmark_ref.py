#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Reference answers (canonical, sorted) of the peer contract's q0-q8 over the
# output of nexmark_dump.c, for checking a peer on small inputs:
#   nexmark_dump 200000 42 10000 | python3 bench/peers/nexmark_ref.py q5 > ref_q5.txt
# (q2 q3 q4 q5 q7 q8 here; q0/q1 are projections of the B lines.)
import sys, collections
q = sys.argv[1]
P, A, B = [], [], []
for line in sys.stdin.buffer:
    f = line.rstrip(b'\n').split(b'\t')
    if f[0] == b'P': P.append((int(f[3]), f[4], f[7], f[8], int(f[2])))  # id name city state dt
    elif f[0] == b'A': A.append((int(f[3]), int(f[2]), int(f[8]), int(f[9]), int(f[10])))  # id dt expires seller cat
    else: B.append((int(f[3]), int(f[4]), int(f[5]), int(f[2]), f[8]))  # auction bidder price dt extra
out = []
S = 1000000
if q == 'q2':
    out = [b'%d\t%d' % (a, p) for a, _, p, _, _ in B if a % 123 == 0]
elif q == 'q5':
    cnt = collections.Counter()
    for a, _, _, t, _ in B:
        e0 = t - t % (2 * S) + 2 * S
        for k in range(5): cnt[(e0 + k * 2 * S, a)] += 1
    mx = collections.defaultdict(int)
    for (w, a), n in cnt.items(): mx[w] = max(mx[w], n)
    out = [b'%d\t%d\t%d' % (a, n, w) for (w, a), n in cnt.items() if n == mx[w]]
elif q == 'q7':
    mx = {}
    for a, bd, p, t, x in B:
        w = t - t % (10 * S) + 10 * S; mx[w] = max(mx.get(w, p), p)
    out = [b'%d\t%d\t%d\t%d\t%s\t%d' % (a, p, bd, t, x, t - t % (10 * S) + 10 * S) for a, bd, p, t, x in B if p == mx[t - t % (10 * S) + 10 * S]]
elif q == 'q8':
    sel = {(s, dt - dt % (10 * S)) for _, dt, _, s, _ in A}
    out = [b'%d\t%s\t%d' % (i, n, dt - dt % (10 * S)) for i, n, _, _, dt in P if (i, dt - dt % (10 * S)) in sel]
elif q == 'q3':
    ps = {i: (n, c, s) for i, n, c, s, _ in P if s in (b'OR', b'ID', b'CA')}
    out = [b'%s\t%s\t%s\t%d' % (*ps[s], i) for i, _, _, s, cat in A if cat == 10 and s in ps]
elif q == 'q4':
    au = {i: (dt, ex, cat) for i, dt, ex, _, cat in A}
    best = {}
    for a, _, p, t, _ in B:
        if a in au and au[a][0] <= t <= au[a][1]: best[a] = max(best.get(a, p), p)
    tot = collections.defaultdict(lambda: [0, 0])
    for a, p in best.items(): tot[au[a][2]][0] += p; tot[au[a][2]][1] += 1
    out = [(b'%d\t' % c) + (b'%.3f' % (s / n)) + (b'\t%d' % n) for c, (s, n) in tot.items()]
sys.stdout.buffer.write(b''.join(sorted(l + b'\n' for l in out)))
