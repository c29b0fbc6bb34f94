#!/usr/bin/env python3
"""Attribute a CPU profile of a Nexmark benchmark to buckets (BENCHMARKS.md, fifth session):
   go tool pprof -traces PROF | python3 internal/nexmarkq/buckets.py EVENTS"""
import re, sys
events = float(sys.argv[1])
text = sys.stdin.read()
blocks = text.split('-----------+-------------------------------------------------------')
def secs(v):
    m = re.match(r'([\d.]+)(ms|s|us|ns)', v)
    x = float(m.group(1)); u = m.group(2)
    return x * {'s':1,'ms':1e-3,'us':1e-6,'ns':1e-9}[u]
whole = [  # a frame anywhere in the stack decides
    ('generator', [r'connector/nexmark\.\(\*generator\)', r'connector/nexmark\.\(\*reader\)', r'connector/nexmark\.\(\*rng\)']),
    ('gc+alloc', [r'runtime\.gcBgMarkWorker', r'runtime\.bgsweep', r'runtime\.bgscavenge']),
    ('checkpoint', [r'\(\*Subtask\)\.checkpoint', r'AppendSnapshot', r'internal/snapshot']),
]
inner = [  # the innermost matching frame decides
    ('gc+alloc', [r'runtime\.mallocgc', r'runtime\.growslice', r'runtime\.newobject', r'runtime\.makeslice', r'runtime\.gcAssist', r'runtime\.(makemap|newarray)', r'runtime\.memclrNoHeap', r'runtime\.(gcStart|gcMark|scanobject|markroot)']),
    ('exchange: chan/sched', [r'runtime\.(schedule|findRunnable|park_m|futex|notesleep|notewakeup|chansend|chanrecv|selectgo|ready|goready|wakep|netpoll|usleep|stopm|startm|mcall|gopark|runqgrab|stealWork|lock2|unlock2|semacquire|semrelease)', r'sync\.']),
    ('exchange: shuffle/keys', [r'internal/shuffle\.', r'internal/runtime\.(keyEncoder|KeyEncoder|KeyDecoder|keyDecoder|intKey)', r'keycodec', r'state\.KeyGroupFor', r'internal/inbox']),
    ('timers', [r'internal/timers\.']),
    ('checkpoint', [r'internal/snapshot', r'\(\*Subtask\)\.checkpoint', r'state\.\(\*Backend\)\.AppendSnapshot', r'appendSnapshot', r'internal/(dstl|changelog|manifest|coord|align)', r'eddy/(checkpoint|blob)', r'runtime\.(write1|read)$', r'syscall\.', r'os\.']),
    ('state', [r'eddy/state\.']),
    ('sink', [r'connector/discard', r'eddy\.ToSink']),
    ('source/watermarks', [r'internal/source\.', r'advanceWatermark', r'eddy\.Watermarks', r'RunSource', r'nexmarkq\.EventTime', r'time\.UnixMilli']),
    ('views+keyBy fn', [r'eddy\.FlatMap', r'nexmarkq\.build.*\.(bids|auctions|persons)', r'eddy\.KeyBy.*func[0-9]+$', r'nexmarkq\.build']),
    ('operator logic', [r'eddy\.\(\*windowFn', r'eddy\.buildKeyed', r'keyedPush', r'eddy\.\(\*Context', r'nexmarkq\.\(', r'eddy\.\(\*', r'eddy\.openKeyed', r'internal/runtime\.\(\*Keyed\)']),
    ('loop work', [r'nexmarkq\.loops', r'nexmarkq\.winnerLoop', r'nexmarkq\.runLoop']),
]
tot = {}
allsum = 0.0
for b in blocks:
    lines = [l for l in b.strip().split('\n') if l.strip()]
    if not lines: continue
    m = re.match(r'\s*([\d.]+(?:ms|s|us|ns))\s+(.*)', lines[0])
    if not m: continue
    v = secs(m.group(1))
    frames = [m.group(2).strip()] + [l.strip() for l in lines[1:]]
    frames = [re.sub(r'\[.*', '', f) for f in frames]  # drop generic shapes
    cat = None
    for name, pats in whole:
        if any(re.search(p, f) for f in frames for p in pats):
            cat = name; break
    if cat is None:
        for f in frames:
            for name, pats in inner:
                if any(re.search(p, f) for p in pats):
                    cat = name; break
            if cat: break
    if cat == 'state' and any('FireDue' in f for f in frames):
        cat = 'state (in timer firing)'
    if cat is None:
        cat = 'other: ' + frames[0][:60]
    tot[cat] = tot.get(cat, 0) + v
    allsum += v
# fold small 'other' entries
out = {}
for k, v in tot.items():
    if k.startswith('other') and v / allsum < 0.01:
        k = 'other (each <1%)'
    out[k] = out.get(k, 0) + v
for k, v in sorted(out.items(), key=lambda x: -x[1]):
    print(f'{k:40s} {v:7.3f}s {100*v/allsum:5.1f}% {v*1e9/events:7.1f} ns/event')
print(f'{"total":40s} {allsum:7.3f}s        {allsum*1e9/events:7.1f} ns/event')
