"""Compiles LuminaV's Triton kernels ahead of time (cubin/PTX, hsaco) and writes their manifest.json.

Run at build time (src/optim/triton/CMakeLists.txt) on a machine without a GPU:
``triton.compile`` with an explicit GPUTarget uses the wheel's own ptxas and
ROCm linker, so no driver is needed (``triton.tools.compile`` wants an active
driver, and its --target flag fails in 3.6). The kernels are the package's own
(python/luminamoon/optim/triton_kernels.py, loaded by path: the package need
not be built). Each (kernel variant, architecture) is one file, because a
Triton module holds one kernel; DIR/cuda/manifest.json and DIR/rocm/manifest.json list every file with its size
and sha256 under the kernel it belongs to, and every kernel with its argument
signature and ``num_trailing_scratch_ptrs`` (Note [trailing scratch pointers]
in src/optim/cuda/triton_abi.h), which the C++ loader checks against the
Triton version recorded with them.

  python build_triton_aot.py --out DIR [--targets sm_90,gfx942] [--kernels clm_f32]
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS_PY = HERE.parents[2] / "python" / "luminamoon" / "optim" / "triton_kernels.py"
ALL_TARGETS = ("sm_80", "sm_90", "sm_100", "sm_120", "compute_80", "gfx90a", "gfx942")

# Note [AOT kernel set]: the variants a C caller needs for one CLM step of fp32, bf16 or fp16
# parameters (fp32 masters for 16-bit ones, stochastic rounding), with the finite check:
# the step's constants, pass 1's finite check and its finalize, pass 2, the verdict and the
# step counter. The launch geometry is the JIT's (Note [Triton block sizes] in triton_kernels.py),
# recorded per kernel (threads, elements per program); the C++ launcher reads it from the manifest.


def _geometry() -> dict:
    """triton_kernels.py's block sizes and warps (Note [Triton block sizes]), read without importing triton."""
    names = {"APPLY_BLOCK", "REDUCE_BLOCK", "FINALIZE_BLOCK", "NUM_WARPS", "FACTOR_CHUNK_ROWS", "FACTOR_WIDE_COLS",
             "FACTOR_WIDE_COLS_2B", "FACTOR_NARROW_COLS", "FACTOR_LOAD_ROWS", "FACTOR_ROW_BLOCK", "FACTOR_COL_BLOCK", "FACTOR_MERGE",
             "FACTOR_WARPS", "FACTOR_WARPS_ONE_ALIGNED", "FACTOR_FORM_WARPS"}
    found = {}
    for node in ast.parse(KERNELS_PY.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and getattr(node.targets[0], "id", None) in names:
            found[node.targets[0].id] = ast.literal_eval(node.value)
    missing = names - set(found)
    if missing:
        raise SystemExit(f"{KERNELS_PY} does not define {sorted(missing)}")
    return found


_G = _geometry()
APPLY_BLOCK, REDUCE_BLOCK, FINALIZE_BLOCK, NUM_WARPS = (_G[k] for k in ("APPLY_BLOCK", "REDUCE_BLOCK",
                                                                         "FINALIZE_BLOCK", "NUM_WARPS"))
FACTOR_CHUNK_ROWS, FACTOR_LOAD_ROWS, FACTOR_WARPS = _G["FACTOR_CHUNK_ROWS"], _G["FACTOR_LOAD_ROWS"], _G["FACTOR_WARPS"]
FACTOR_ROW_BLOCK, FACTOR_COL_BLOCK, FACTOR_MERGE = _G["FACTOR_ROW_BLOCK"], _G["FACTOR_COL_BLOCK"], _G["FACTOR_MERGE"]
FACTOR_FORM_WARPS, FACTOR_WARPS_ONE_ALIGNED = _G["FACTOR_FORM_WARPS"], _G["FACTOR_WARPS_ONE_ALIGNED"]


def _apply(pdtype: int, gdtype: int, master: bool, kind: int = 0) -> dict:
    return dict(PDTYPE=pdtype, GDTYPE=gdtype, KIND=kind, MASTER=master, SR=pdtype != 0, HAS_LAM=False,
                HAS_TAU=False, CAUTIOUS=False, BOUND=0, SCALED=False, BLOCK=APPLY_BLOCK)


def _finalize(kind: int) -> dict:
    return dict(ROUND_GRAD=True, ROUND_UPDATE=False, CHECK_FINITE=True, KIND=kind, CAUTIOUS=False,
                BOUND_TENSOR=False, BLOCK=FINALIZE_BLOCK)


VARIANTS = {
    # name: (kernel function, constexprs, elements per program (0: one program))
    "luminav_triton_prepare": ("prepare_kernel", dict(LR=0, SCALED=False, FOUND_INF=False, RESET=True), 0),
    "luminav_triton_reduce_gf32": ("reduce_kernel", dict(GDTYPE=0, XDTYPE=0, GRAD_SUMS=True, UPDATE_SUMS=False,
                                                          KIND=0, HAS_LAM=False, HAS_TAU=False, SCALED=False,
                                                          VERDICT=False,
                                                          BLOCK=REDUCE_BLOCK), REDUCE_BLOCK),
    "luminav_triton_reduce_gbf16": ("reduce_kernel", dict(GDTYPE=1, XDTYPE=0, GRAD_SUMS=True, UPDATE_SUMS=False,
                                                           KIND=0, HAS_LAM=False, HAS_TAU=False, SCALED=False,
                                                           VERDICT=False,
                                                           BLOCK=REDUCE_BLOCK), REDUCE_BLOCK),
    "luminav_triton_finalize": ("finalize_kernel", dict(ROUND_GRAD=True, ROUND_UPDATE=False, CHECK_FINITE=True,
                                                        KIND=0, CAUTIOUS=False, BOUND_TENSOR=False,
                                                        BLOCK=FINALIZE_BLOCK), 0),
    "luminav_triton_apply_pf32_gf32": ("apply_kernel", _apply(0, 0, False), APPLY_BLOCK),
    "luminav_triton_apply_pbf16_gbf16": ("apply_kernel", _apply(1, 1, True), APPLY_BLOCK),
    "luminav_triton_commit": ("commit_kernel", dict(FOUND_INF=False, SKIP_NONFINITE=False), 0),
    "luminav_triton_advance": ("advance_kernel", dict(), 0),
}
# Note [AOT TD-CLM set]: TD-CLM's round 0 and pass 2 for the same dtype pairs (second moments
# tensor, row and factored; a TD-CLM tensor with C = 1 steps as CLM, core/second_moment_layout.h):
# the tensor form's sum g^2 is the CLM reduce kernel's (GRAD_SUMS reads only the gradient) and its
# device finalize gives s; the row and factored forms read their gradient once in the sums kernel
# (Note [Triton factor tiles] in triton_kernels.py) at two fixed tiles, "wide" (128 x 128, and
# 128 x 256 for a bf16 gradient) for C >= 128 and "narrow" (128 x 16) below, named by their tile
# (rows x columns per program) so that the C++ launcher, which
# computes the grids from the same numbers, refuses a build of other shapes by name; the factors
# by factor_rows and factor_cols (one variant each: the form is a run-time argument); pass 2 of
# each form. Session 6 replaced session 5's row sums and column sums at two tiles each (16
# variants) and the per-form finalize (2) by these 8 + 2: 23 TD-CLM variants instead of 31.
TDCLM_KINDS = {"tensor": 1, "row": 2, "factored": 3}  # triton_kernels.TENSOR, ROW, FACTORED
SUMS_TILES = {"gf32": (_G["FACTOR_WIDE_COLS"], _G["FACTOR_NARROW_COLS"]),  # (wide, narrow) columns per program
              "gbf16": (_G["FACTOR_WIDE_COLS_2B"], _G["FACTOR_NARROW_COLS"])}
VARIANTS["luminav_triton_finalize_tensor"] = ("finalize_kernel", _finalize(1), 0)
VARIANTS["luminav_triton_factor_rows"] = ("factor_rows_kernel", dict(BLOCK=FACTOR_ROW_BLOCK, MERGE=FACTOR_MERGE),
                                          FACTOR_ROW_BLOCK, FACTOR_FORM_WARPS)
VARIANTS["luminav_triton_factor_cols"] = ("factor_cols_kernel", dict(BLOCK=FACTOR_COL_BLOCK, MERGE=FACTOR_MERGE),
                                          FACTOR_COL_BLOCK, FACTOR_FORM_WARPS)
for _form, _kind in TDCLM_KINDS.items():
    VARIANTS[f"luminav_triton_apply_pf32_gf32_{_form}"] = ("apply_kernel", _apply(0, 0, False, _kind), APPLY_BLOCK)
    VARIANTS[f"luminav_triton_apply_pbf16_gbf16_{_form}"] = ("apply_kernel", _apply(1, 1, True, _kind), APPLY_BLOCK)
FACTOR_VARIANTS = []
for _g, _gdtype in (("gf32", 0), ("gbf16", 1)):
    for _bc in SUMS_TILES[_g]:
        FACTOR_VARIANTS.append(f"luminav_triton_factor_sums_{_g}_{FACTOR_CHUNK_ROWS}x{_bc}")
        VARIANTS[FACTOR_VARIANTS[-1]] = ("factor_sums_kernel", dict(
            GDTYPE=_gdtype, SCALED=False, CHUNK_ROWS=FACTOR_CHUNK_ROWS, LOAD_ROWS=FACTOR_LOAD_ROWS[_bc], BLOCK_C=_bc),
            FACTOR_CHUNK_ROWS * _bc, FACTOR_WARPS[_bc])
# Note [aligned variants]: the JIT specializes every launch on its arguments: a tensor address that is
# a multiple of 16 bytes and an element count that is a multiple of 16 reach the compiler as
# tt.divisibility 16, which lets it vectorize the loads and stores (16 bytes per thread). An AOT
# kernel knows nothing about its arguments, and without the hint the CLM fp32 step at 2^28 ran 17%
# slower than the same kernel JIT-compiled (docs/benchmarks.md, issue 18 session 2). Each pass
# kernel therefore also comes as NAME_a16, compiled with those hints on the tensor pointers and on
# n (and rows); the C++ launcher takes it when a tensor's addresses and N qualify
# (triton_aot_clm_step.cc), the generic kernel otherwise.
ALIGNED_ARGS = {"g_ptr", "m_ptr", "v_ptr", "x_ptr", "p_ptr", "master_ptr", "partials_ptr", "n", "rows"}
# The sums kernels index the gradient as r * cols + c: their _a16 kernels also take C as a
# multiple of 16 (the launcher checks R, C and the gradient's address), and the partials' addresses
# (the bases of the workspace's row and column partial buffers, cuMemAlloc's: 256-byte aligned);
# they take FACTOR_WARPS_ONE_ALIGNED, as the JIT's one-tensor launch does.
FACTOR_ALIGNED_ARGS = ALIGNED_ARGS | {"cols", "row_part_ptr", "col_part_ptr"}
# bf16 too: their first build faulted on the H200 (session 2) because the manifest gave every kernel
# the shared memory of the last target compiled (gfx942: 0 bytes) while the sm_90 bf16 apply needs
# 4096 (its 16-bit loads and fp32 math use different layouts, converted through shared memory); see
# Note [shared memory per platform].
for _name in [v for v in VARIANTS if "_reduce_" in v or "_apply_" in v]:
    VARIANTS[_name + "_a16"] = VARIANTS[_name]
for _name in FACTOR_VARIANTS:
    _fn, _constexprs, _per, _ = VARIANTS[_name]
    VARIANTS[_name + "_a16"] = (_fn, _constexprs, _per, FACTOR_WARPS_ONE_ALIGNED[_constexprs["BLOCK_C"]])
# Note [AOT tensor tables]: the multi-tensor kernels of the asynchronous step (Note [tensor tables] and
# Note [factored tables] in triton_kernels.py) for the same dtype pairs: one launch per stage steps every
# CLM tensor, or every factored TD-CLM tensor of one sums tile, of a group. Their alignment is a
# constexpr (ALIGNED: the hints sit in the kernels, on addresses read from the tables), so each comes
# as NAME and NAME_a16 by that argument. One at a time, the Llama 98M step took ~450 AOT launches
# and 3x the nvcc kernels' GPU time (docs/benchmarks.md, row X3j).
MULTI_PAIRS = {"pf32_gf32": (0, 0, False), "pbf16_gbf16": (1, 1, True)}  # (PDTYPE, GDTYPE, MASTER)
for _sfx, _aligned in (("", False), ("_a16", True)):
    for _g, _gdtype in (("gf32", 0), ("gbf16", 1)):
        VARIANTS[f"luminav_triton_multi_finite_check_{_g}{_sfx}"] = ("finite_check_multi_kernel", dict(
            GDTYPE=_gdtype, SCALED=False, ALIGNED=_aligned, BLOCK=REDUCE_BLOCK), REDUCE_BLOCK)
        for _bc in SUMS_TILES[_g]:
            VARIANTS[f"luminav_triton_multi_factored_sums_{_g}_{FACTOR_CHUNK_ROWS}x{_bc}{_sfx}"] = (
                "factored_sums_multi_kernel", dict(GDTYPE=_gdtype, SCALED=False, CHUNK_ROWS=FACTOR_CHUNK_ROWS,
                                                   LOAD_ROWS=FACTOR_LOAD_ROWS[_bc], BLOCK_C=_bc, ALIGNED=_aligned),
                FACTOR_CHUNK_ROWS * _bc, FACTOR_WARPS[_bc])
    for _pair, (_pd, _gd, _master) in MULTI_PAIRS.items():
        _multi_apply = dict(PDTYPE=_pd, GDTYPE=_gd, MASTER=_master, SR=_pd != 0, HAS_LAM=False, HAS_TAU=False,
                            BOUND=0, SCALED=False, ALIGNED=_aligned, BLOCK=APPLY_BLOCK)
        VARIANTS[f"luminav_triton_multi_apply_{_pair}{_sfx}"] = ("apply_multi_kernel", _multi_apply, APPLY_BLOCK)
        VARIANTS[f"luminav_triton_multi_factored_apply_{_pair}{_sfx}"] = ("factored_apply_multi_kernel",
                                                                          _multi_apply, APPLY_BLOCK)
VARIANTS["luminav_triton_multi_factored_rows"] = ("factored_rows_multi_kernel",
                                                  dict(BLOCK=FACTOR_ROW_BLOCK, MERGE=FACTOR_MERGE), FACTOR_ROW_BLOCK,
                                                  FACTOR_FORM_WARPS)
VARIANTS["luminav_triton_multi_factored_cols"] = ("factored_cols_multi_kernel",
                                                  dict(BLOCK=FACTOR_COL_BLOCK, MERGE=FACTOR_MERGE), FACTOR_COL_BLOCK,
                                                  FACTOR_FORM_WARPS)
KERNEL_SETS = {"all": tuple(VARIANTS), "clm_f32": tuple(v for v in VARIANTS if "bf16" not in v)}

# Argument types of the kernels' non-constexpr parameters (Triton signature strings).
_POINTER_TYPES = {"step_out_ptr": "*i64", "step_ptr": "*i64", "words_ptr": "*i32", "status_ptr": "*i32",
                  "partials_ptr": "*fp64", "row_sums_ptr": "*fp64", "col_sums_ptr": "*fp64", "hp64_ptr": "*fp64",
                  "row_part_ptr": "*fp64", "col_part_ptr": "*fp64", "block_sums_ptr": "*fp64",
                  "table_ptr": "*i64", "grad_table_ptr": "*i64", "program_map_ptr": "*i32"}
_INT_ARGS = {"n", "rows", "cols", "seed", "index_offset", "num_partials", "position", "chunks", "with_cols", "strips",
             "form_cols", "row_blocks"}


def trailing_scratch_ptrs(version: str) -> int:
    """Hidden pointers after the user arguments (the issue's facts; Note [trailing scratch pointers]):
    none up to 3.2, global_scratch from 3.3, global and profile scratch from 3.5."""
    major, minor = (int(x) for x in version.split(".")[:2])
    if (major, minor) <= (3, 2):
        return 0
    if (major, minor) <= (3, 4):
        return 1
    return 2


def load_kernels():
    spec = importlib.util.spec_from_file_location("luminav_triton_kernels", KERNELS_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def signature_of(fn, constexprs: dict) -> tuple[dict, list[str]]:
    """(Triton signature, [the C argument types in order]) of a kernel variant."""
    sig, c_args = {}, []
    for name in fn.arg_names:
        if name in constexprs:
            sig[name] = "constexpr"
            continue
        if name.endswith("_ptr"):
            ty = _POINTER_TYPES.get(name, "*fp32")
            sixteen = {"p_ptr": "PDTYPE", "g_ptr": "GDTYPE", "x_ptr": "XDTYPE"}.get(name)
            if sixteen and constexprs.get(sixteen, 0) != 0:
                ty = "*i16"  # 16-bit data travels as int16 (triton_kernels.py)
        elif name in _INT_ARGS:
            ty = "i64"
        else:
            ty = "fp32"
        sig[name] = ty
        c_args.append(f"{name}:{ty}")
    return sig, c_args


# Note [shared memory per platform]: a Triton kernel's dynamic shared memory (metadata.shared) is
# set by its target: the same variant may need 4096 bytes on sm_90 and none on gfx942. The loader
# launches a kernel with its manifest entry's shared_mem_bytes whatever artifact it loaded, so each
# platform's manifest gives each kernel the largest need of that platform's artifacts (more than a
# kernel uses is harmless; less is an illegal address); each artifact records its own as well.
MAX_DYNAMIC_SHARED = 48 * 1024  # what a launch may ask for without cuFuncSetAttribute


def shared_mem_bytes(artifacts: list[dict], kernel: str) -> int:
    """The largest shared-memory need of `kernel` among `artifacts` (one platform's)."""
    return max((a["shared_mem_bytes"] for a in artifacts if a["kernel"] == kernel), default=0)


def target_of(arch: str):
    from triton.backends.compiler import GPUTarget
    if arch.startswith("sm_") or arch.startswith("compute_"):
        return GPUTarget("cuda", int(arch.split("_")[1]), 32)
    return GPUTarget("hip", arch, 64)


def elf_machine(data: bytes) -> int:
    """e_machine of an ELF64 little-endian image (190 EM_CUDA, 224 EM_AMDGPU), -1 if not ELF64."""
    if len(data) < 20 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return -1
    return int.from_bytes(data[18:20], "little")


def build(out: Path, targets: list[str], kernel_names: list[str]) -> dict:
    import triton
    from triton.compiler import ASTSource
    tk = load_kernels()
    out.mkdir(parents=True, exist_ok=True)
    version = triton.__version__
    trailing = trailing_scratch_ptrs(version)
    artifacts, kernels, timings = [], [], {}
    for variant in kernel_names:
        fn_name, constexprs, per_program, *rest = VARIANTS[variant]
        warps = rest[0] if rest else NUM_WARPS
        fn = getattr(tk, fn_name)
        sig, c_args = signature_of(fn, constexprs)
        attrs = {}
        if variant.endswith("_a16"):  # Note [aligned variants]
            hinted = FACTOR_ALIGNED_ARGS if variant.removesuffix("_a16") in FACTOR_VARIANTS else ALIGNED_ARGS
            attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in hinted if a in sig}
        for arch in targets:
            t0 = time.perf_counter()
            compiled = triton.compile(ASTSource(fn, sig, constexprs=constexprs, attrs=attrs), target=target_of(arch),
                                      options=dict(num_warps=warps, enable_fp_fusion=False))
            timings[f"{variant}@{arch}"] = round(time.perf_counter() - t0, 3)
            md = compiled.metadata
            scratch = int(getattr(md, "global_scratch_size", 0)) + int(getattr(md, "profile_scratch_size", 0))
            if scratch:
                raise SystemExit(f"{variant} for {arch} needs {scratch} bytes of Triton scratch; the C loader "
                                 "passes null scratch pointers only")
            if arch.startswith("compute_"):
                kind, data, suffix = "ptx", compiled.asm["ptx"].encode(), "ptx"
            elif arch.startswith("sm_"):
                kind, data, suffix = "cubin", compiled.asm["cubin"], "cubin"
                if elf_machine(data) != 190:
                    raise SystemExit(f"{variant} for {arch}: not an EM_CUDA ELF64 image")
            else:
                kind, data, suffix = "hsaco", compiled.asm["hsaco"], "hsaco"
                if elf_machine(data) != 224:
                    raise SystemExit(f"{variant} for {arch}: not an EM_AMDGPU ELF64 image")
            platform = "rocm" if kind == "hsaco" else "cuda"
            file = f"{variant}.{arch}.{suffix}"
            (out / platform).mkdir(parents=True, exist_ok=True)
            (out / platform / file).write_bytes(data)
            artifacts.append({"arch": arch, "kind": kind, "file": file, "size": len(data),
                              "sha256": hashlib.sha256(data).hexdigest(), "kernel": variant,
                              "symbol": md.name, "platform": platform})
            artifacts[-1]["threads"] = warps * (64 if kind == "hsaco" else 32)
            artifacts[-1]["shared_mem_bytes"] = int(md.shared)
            if int(md.shared) > MAX_DYNAMIC_SHARED:
                raise SystemExit(f"{variant} for {arch} needs {md.shared} bytes of shared memory; the C loader "
                                 f"launches with at most {MAX_DYNAMIC_SHARED} (no opt-in attribute)")
        entry = {"name": variant, "signature": "(" + ", ".join(c_args) + ")",
                 "num_trailing_scratch_ptrs": trailing, "block_size": warps * 32,
                 "elements_per_program": per_program, "constexprs": {k: int(v) for k, v in constexprs.items()}}
        kernels.append(entry)
    # One manifest per platform (its files beside it): the C++ loader reads cuda/ or rocm/.
    for platform in ("cuda", "rocm"):
        mine = [dict(a) for a in artifacts if a["platform"] == platform]
        if not mine:
            continue
        for a in mine:
            del a["platform"]
        manifest = {"format": "luminav-kernels/1", "platform": platform, "triton_version": version,
                    "artifacts": mine, "kernels": [dict(k, shared_mem_bytes=shared_mem_bytes(mine, k["name"]))
                                                   for k in kernels]}
        tmp = out / platform / "manifest.json.tmp"
        tmp.write_text(json.dumps(manifest, indent=1) + "\n")
        os.replace(tmp, out / platform / "manifest.json")
    return timings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--targets", default=",".join(ALL_TARGETS))
    parser.add_argument("--kernels", default="all", help="a set (" + ", ".join(KERNEL_SETS) + ") or names")
    parser.add_argument("--timings", type=Path, help="write per-compile seconds as JSON here")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    bad = [t for t in targets if not (t.startswith(("sm_", "compute_", "gfx")))]
    if bad:
        parser.error(f"unknown targets {bad}: sm_NN, compute_NN (PTX) or gfxNNN")
    names = list(KERNEL_SETS.get(args.kernels, args.kernels.split(",")))
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown kernels {unknown}; known: {', '.join(VARIANTS)}")
    t0 = time.perf_counter()
    timings = build(args.out, targets, names)
    total = time.perf_counter() - t0
    if args.timings:
        args.timings.write_text(json.dumps({"total_s": round(total, 2), "compiles": timings}, indent=1))
    print(f"luminav triton AOT: {len(names)} kernels x {len(targets)} targets in {total:.1f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
