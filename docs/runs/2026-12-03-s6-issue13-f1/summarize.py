# summarize.py AB_OUTPUT: medians per arm of ab_s5.sh's processes (session 5's front_cpu.py lines:
# "ARM f1_luminav wall W cpu C | f1_fused wall W cpu C | cold_luminav ... | warm_luminav ... | load L"),
# the after/before ratio per round (round r = the r-th before and after lines) and each arm's ratio
# to torch's fused AdamW in the same process (thread CPU). F1 in us per parameter, cold/warm in us per step.
import re, statistics, sys
rows = {"before": [], "after": []}
for line in open(sys.argv[1]):
    arm = line.split(" ", 1)[0]
    if arm not in rows:
        continue
    fields = {name: (float(w), float(c)) for name, w, c in re.findall(r"(\w+) wall ([\d.]+) cpu ([\d.]+)", line)}
    fields["load"] = float(re.search(r"load ([\d.]+)", line)[1])
    rows[arm].append(fields)
med = statistics.median
for arm, r in rows.items():
    out = [f"{arm}: {len(r)} processes, load {min(x['load'] for x in r):.1f}-{max(x['load'] for x in r):.1f}"]
    for name in [k for k in r[0] if k != "load"]:
        cpu = [x[name][1] for x in r]
        out.append(f"  {name}: thread CPU median {med(cpu):.3f} (range {min(cpu):.3f}-{max(cpu):.3f}), "
                   f"wall median {med([x[name][0] for x in r]):.3f}")
    out.append(f"  f1 luminav / fused thread CPU, median {med([x['f1_luminav'][1] / x['f1_fused'][1] for x in r]):.3f}")
    print("\n".join(out))
for name in [k for k in rows["before"][0] if k.endswith("luminav")]:
    ratios = [a[name][1] / b[name][1] for b, a in zip(rows["before"], rows["after"])]
    print(f"{name} after/before thread CPU per round: median {med(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f}), after lower in {sum(x < 1 for x in ratios)} of {len(ratios)}")
