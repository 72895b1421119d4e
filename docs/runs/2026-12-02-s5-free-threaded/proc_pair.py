# 1 thread of data work per process; run alone and as two processes at once: CPU time per item.
import sys, time, numpy as np
from luminamoon import data
words = "the quick brown fox jumps over the lazy dog and writes to someone@example.com".split()
rng = np.random.default_rng(1024)
batches = [[" ".join(words[j] for j in rng.integers(0, len(words), 40)) + "  " for _ in range(1024)] for _ in range(4)]
for i in range(5): data.mask_pii(data.clean_batch(batches[i % 4]))
c0 = time.process_time(); n = 150
for i in range(n): data.mask_pii(data.clean_batch(batches[i % 4]))
print(sys.argv[1], "CPU/item us %.0f" % ((time.process_time() - c0) / n * 1e6))
