#!/usr/bin/env python3
"""Summarize `go test -bench` output of this module into the BENCHMARKS.md
tables: the median of each benchmark over -count runs, and ratios against
vtprotobuf and protobuf-go from the same run.

usage: go test -run '^$' -bench . -benchmem -count 6 ./... | python3 summarize.py
"""
import collections
import re
import statistics
import sys

d = collections.defaultdict(lambda: collections.defaultdict(list))
for line in sys.stdin:
    m = re.match(r'Benchmark(\S+)-\d+\s+\d+\s+([\d.]+) ns/op(.*)', line)
    if not m:
        continue
    d[m.group(1)]['ns'].append(float(m.group(2)))
    for v, u in re.findall(r'([\d.]+) (\S+)', m.group(3)):
        d[m.group(1)][u].append(float(v))
med = {n: {k: statistics.median(x) for k, x in v.items()} for n, v in d.items()}
for op in ['Encode', 'DecodeFresh', 'DecodeReuse', 'OTLPEncode', 'OTLPDecodeFresh', 'OTLPDecodeReuse']:
    if f'{op}/vtprotobuf' not in med:
        continue
    enc = op.endswith('Encode')
    print(f"\n### {op}\n")
    print("| library | ns/op | vs vtprotobuf | vs protobuf-go | B/op | allocs/op |" + (" bytes |" if enc else ""))
    print("|---|---|---|---|---|---|" + ("---|" if enc else ""))
    vt, pb = med[f'{op}/vtprotobuf']['ns'], med[f'{op}/protobuf']['ns']
    for lib in ['eddy', 'vtprotobuf', 'protobuf', 'json']:
        r = med.get(f'{op}/{lib}')
        if r is None:
            continue
        row = f"| {lib} | {r['ns']:.0f} | {r['ns']/vt:.2f}x | {r['ns']/pb:.2f}x | {r['B/op']:.0f} | {r['allocs/op']:.0f} |"
        if enc:
            row += f" {r['bytes']:.0f} |"
        print(row)

# Paired benchmarks (benchPaired): per round the median of per-call ratios;
# here the median over rounds, with the range.
paired = [n for n in d if 'Paired/' in n]
if paired:
    print("\n### Paired (sides timed call by call)\n")
    print("| benchmark | eddy ns | vtprotobuf ns | eddy / vtprotobuf (median, range) | protobuf / vtprotobuf | rounds |")
    print("|---|---|---|---|---|---|")
    for n in sorted(paired):
        r = d[n]['eddy/vtprotobuf']
        print(f"| {n} | {med[n]['eddy-ns']:.0f} | {med[n]['vtprotobuf-ns']:.0f} | "
              f"{statistics.median(r):.3f}x ({min(r):.3f}-{max(r):.3f}) | "
              f"{med[n]['protobuf/vtprotobuf']:.2f}x | {len(r)} |")
