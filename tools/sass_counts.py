#!/usr/bin/env python3
"""Static instruction counts per kernel from `cuobjdump -sass` (read on stdin): all, shared loads (and how many are
16 bytes wide), local-memory spills, mma, barriers. A development aid for kernels/gla/cuda/NOTES.md: a static count says
what the compiler emitted, not how often it runs. Usage: cuobjdump -sass BINARY | sass_counts.py [NAME_REGEX]"""
import re
import subprocess
import sys

pattern = re.compile(sys.argv[1]) if len(sys.argv) > 1 else None
counts = {}
name = None
for line in sys.stdin:
    m = re.search(r"Function : (\S+)", line)
    if m:
        name = m.group(1)
        counts[name] = dict(all=0, lds=0, lds128=0, local=0, mma=0, bar=0)
        continue
    m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
    if not m or name is None:
        continue
    op = m.group(1)
    c = counts[name]
    c["all"] += 1
    if op.startswith("LDS"):
        c["lds"] += 1
        c["lds128"] += op.startswith("LDS.128")
    c["local"] += op.startswith(("LDL", "STL"))
    c["mma"] += op.startswith("HMMA")
    c["bar"] += op.startswith("BAR")
names = list(counts)
demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
for mangled, dn in zip(names, demangled):
    dn = dn.replace("spb::gla_cuda::(anonymous namespace)::", "")
    if pattern and not pattern.search(dn):
        continue
    c = counts[mangled]
    print(f"{dn[:80]:80s} all {c['all']:6d} lds {c['lds']:5d} (128-bit {c['lds128']:4d}) spill {c['local']:3d} "
          f"mma {c['mma']:5d} bar {c['bar']:3d}")
