# assemble a runnable package from the base install + this worktree's python files + build outputs
set -e
rm -rf /tmp/wt13f_pkg && mkdir -p /tmp/wt13f_pkg
cp -r /work/main/.venv/lib/python3.11/site-packages/luminamoon /tmp/wt13f_pkg/
cp -r /work/wt13f/python/luminamoon/. /tmp/wt13f_pkg/luminamoon/
cp /work/wt13f/build/wt13f/src/python/_native.cpython-311-x86_64-linux-gnu.so /tmp/wt13f_pkg/luminamoon/
for n in libluminav.so libluminav.so.0 libluminav.so.0.1.0; do cp -L /work/wt13f/build/wt13f/src/optim/libluminav.so.0 /tmp/wt13f_pkg/luminamoon/lib/$n; done
