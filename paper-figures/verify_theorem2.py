#!/usr/bin/env python3
"""Plots experiment 1 (Theorem 2 in practice): the false-pass rate of one random test at a
differing position against the prime, with the Schwartz-Zippel bound d/p.
Usage: /usr/bin/python3 paper-figures/verify_theorem2.py theorem2.csv OUT_PREFIX  (writes .png and .pdf)"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = [r for r in csv.DictReader(line for line in open(sys.argv[1]) if not line.startswith("#"))]
series = defaultdict(list)
for r in rows:
    if r["rate"].startswith("n/a"):
        continue
    series[(r["pair"], int(r["degree"]))].append((int(r["prime"]), float(r["rate"]), float(r["bound_d_over_p"])))
fig, ax = plt.subplots(figsize=(6.4, 4.2))
for (pair, degree), pts in sorted(series.items()):
    pts.sort()
    ax.plot([p for p, _, _ in pts], [max(r, 1e-5) for _, r, _ in pts], marker="o", label=f"{pair} (d={degree})")
for degree in sorted({d for _, d in series}):
    ps = sorted({p for (_, d), pts in series.items() if d == degree for p, _, _ in pts})
    ax.plot(ps, [min(1.0, degree / p) for p in ps], "k--", linewidth=0.8)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_ylim(1e-5, 1.5)
ax.set_xlabel("prime p")
ax.set_ylabel("false-pass rate of one test (0 plotted at 1e-5)")
ax.set_title("Theorem 2 in practice (dashed: bound d/p)")
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(sys.argv[2] + ".png", dpi=120)
fig.savefig(sys.argv[2] + ".pdf")
print(f"wrote {sys.argv[2]}.png and .pdf")
