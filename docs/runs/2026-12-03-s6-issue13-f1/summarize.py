# summarize.py AB_OUTPUT: medians of ab.sh's processes per arm, the after/before ratio per round
# (round r = the r-th before and after lines), and each arm's ratio to torch's fused AdamW in the
# same process (thread CPU).
import re, statistics, sys
rows = {"before": [], "after": []}
for line in open(sys.argv[1]):
    m = re.match(r"(before|after) f1_luminav wall ([\d.]+) cpu ([\d.]+) \| f1_fused wall ([\d.]+) cpu ([\d.]+) \| load ([\d.]+)", line)
    if m:
        rows[m[1]].append(tuple(float(x) for x in m.groups()[1:]))
med = lambda xs: statistics.median(xs)
for arm, r in rows.items():
    cpu = [x[1] for x in r]; wall = [x[0] for x in r]
    print(f"{arm}: {len(r)} processes, thread CPU us/param median {med(cpu):.3f} (range {min(cpu):.3f}-{max(cpu):.3f}), "
          f"wall median {med(wall):.3f}; / fused CPU median {med([x[1] / x[3] for x in r]):.3f}; "
          f"fused CPU median {med([x[3] for x in r]):.2f}; load {min(x[4] for x in r):.1f}-{max(x[4] for x in r):.1f}")
ratios = [a[1] / b[1] for b, a in zip(rows["before"], rows["after"])]
print(f"after/before thread CPU per round: median {med(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}); "
      f"after lower in {sum(x < 1 for x in ratios)} of {len(ratios)} rounds")
