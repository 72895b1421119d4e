#!/bin/bash
# Session 25, call 2 (the H100 of call 1, still warm): two runs at once, twelve compiled processes:
# (a) issue 14's repeated regime (100 batches x 5 epochs, final training and held-out loss), fused AdamW,
#     TD-CLM with the cautious mask and Adam-mini, seeds 0-2 (AdamW8bit left out to fit the card and the
#     device time: row T8g has it);
# (b) a screen of a slower second moment for TD-CLM with the mask, betas (0.9, 0.99), fresh regime,
#     1,500 steps, seeds 0-2 (call 1's runs are its comparison), out: screen/.
# Call 2a ran this script before the LD_LIBRARY_PATH line was added (its LuminaV runs failed to import);
# call 2b ran it as `REPEATED_KINDS=luminav_tdclm_cautious DEADLINE=290 bash dev25b.sh`.
set -u
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTHONUNBUFFERED=1
export OUT=${OUT:-$PWD/gpu_out}
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
site=/tmp/lm_site
if [ ! -d $site/luminamoon ]; then bash bench/gpu_suite.sh build; fi
echo 0 > /tmp/lm_site.rc
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/lm_wheels .whl/*.whl
rm -rf /tmp/ev_rep /tmp/ev_scr; mkdir -p "$OUT/screen"
PYTHONPATH=$site:bench:/tmp/lm_wheels timeout 420 python3 bench/optim_llama_evidence.py --work /tmp/ev_rep --out "$OUT" \
  --deadline-s ${DEADLINE:-400} --parallel 9 --regimes repeated --seeds 0 1 2 --held-every 100 \
  --kinds ${REPEATED_KINDS:-adamw_fused luminav_tdclm_cautious adam_mini} -- --compile > "$OUT/evidence.log" 2>&1 &
PYTHONPATH=$site:bench:/tmp/lm_wheels timeout 420 python3 bench/optim_llama_evidence.py --work /tmp/ev_scr --out "$OUT/screen" \
  --deadline-s ${DEADLINE:-400} --parallel 3 --regimes fresh --seeds 0 1 2 --fresh-steps 1500 --held-every 250 \
  --kinds luminav_tdclm_cautious_b2_0.99 -- --compile > "$OUT/screen/evidence.log" 2>&1 &
wait
tail -8 "$OUT/evidence.log"; tail -6 "$OUT/screen/evidence.log"
tar -czf "$OUT/evidence_runs.tar.gz" -C /tmp --exclude='*.json' ev_rep ev_scr
