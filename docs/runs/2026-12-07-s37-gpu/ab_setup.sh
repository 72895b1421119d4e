# Sourced by dev37a.sh, dev37c.sh and dev37d.sh: the card check, the build and the base / new sites of their A/B.
# REQUIRE=H200 leaves at once on any other card (its start is then all the call costs). Base is main before
# Note [programs inside one row] (cc3a24a: build/old_kernels/triton_kernels.py, AOT set build/aot_s35m); new is
# main (build/aot_s36).
export OUT=${OUT:-$PWD/gpu_out}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1; cat "$OUT/gpu.txt"
if [ -n "${REQUIRE:-}" ] && ! grep -q "$REQUIRE" "$OUT/gpu.txt"; then echo "not an $REQUIRE: nothing run"; exit 3; fi
t0=$(date +%s)
left() { echo $(( LIMIT - $(date +%s) + t0 )); }
export LD_LIBRARY_PATH=$PWD/.gpu_bundle/prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
OUT=/tmp/build_new bash bench/gpu_suite.sh build 2>&1 | tail -1
rm -rf /tmp/lm_site_base && cp -r /tmp/lm_site /tmp/lm_site_base
cp build/old_kernels/triton_kernels.py /tmp/lm_site_base/luminamoon/optim/triton_kernels.py
site() { [ "$1" = base ] && echo /tmp/lm_site_base || echo /tmp/lm_site; }
aot() { [ "$1" = base ] && echo "$PWD/build/aot_s35m" || echo "$PWD/build/aot_s36"; }
echo "built at $(( $(date +%s) - t0 )) s"
