"""ctypes mirrors of include/luminav/luminav.h's structs and a loader of libluminav, for the tests."""
from __future__ import annotations

import ctypes as C

import luminamoon
from luminav_reference import Hyper


class Hyperparams(C.Structure):
    _fields_ = [("lr", C.c_double), ("beta1", C.c_double), ("beta2", C.c_double), ("eps", C.c_double),
                ("weight_decay", C.c_double), ("tau", C.c_double), ("lam", C.c_double),
                ("bound_ratio", C.c_double), ("buffer_mode", C.c_int), ("cautious", C.c_int),
                ("bound_mode", C.c_int), ("check_finite", C.c_int), ("stochastic_rounding", C.c_int),
                ("step", C.c_uint64), ("grad_scale", C.c_double)]


class Tensor(C.Structure):
    _fields_ = [("param", C.c_void_p), ("grad", C.c_void_p), ("exp_avg", C.c_void_p),
                ("exp_avg_sq", C.c_void_p), ("master", C.c_void_p), ("num_elements", C.c_size_t),
                ("index_offset", C.c_uint64), ("seed", C.c_uint64), ("param_dtype", C.c_int),
                ("grad_dtype", C.c_int), ("rows", C.c_uint64), ("td_factor", C.c_int)]


class Options(C.Structure):
    _fields_ = [("backend", C.c_char_p), ("device_type", C.c_int), ("device_index", C.c_int),
                ("stream", C.c_void_p), ("scratch", C.c_void_p), ("scratch_bytes", C.c_size_t)]


class Partials(C.Structure):
    _fields_ = [("nonfinite_count", C.c_uint64), ("agree_count", C.c_uint64),
                ("grad_sq_sum", C.c_double), ("update_sq_sum", C.c_double), ("weight_sq_sum", C.c_double),
                ("row_factor_sum", C.c_double), ("row_count", C.c_uint64)]


class FactorSums(C.Structure):
    _fields_ = [("row_sq", C.c_void_p), ("col_sq", C.c_void_p)]


class Globals(C.Structure):
    _fields_ = [("second_moment", C.c_float), ("cautious_scale", C.c_float),
                ("bound_scale", C.c_float), ("row_factor_mean", C.c_float),
                ("logical_rows", C.c_uint64)]


class Group(C.Structure):
    _fields_ = [("hp", C.POINTER(Hyperparams)), ("tensors", C.POINTER(Tensor)), ("count", C.c_size_t),
                ("step_counter", C.c_void_p), ("lr", C.c_void_p), ("lr_dtype", C.c_int)]


class StepStatus(C.Structure):
    _fields_ = [("verdict", C.c_uint32), ("failed", C.c_uint32), ("skipped", C.c_uint32),
                ("refused", C.c_uint32)]


class Async(C.Structure):
    _fields_ = [("status", C.POINTER(StepStatus)), ("host_status", C.POINTER(StepStatus)),
                ("grad_scale", C.c_void_p), ("found_inf", C.c_void_p), ("skip_nonfinite", C.c_int)]


def load_library(path: str | None = None) -> C.CDLL:
    """libluminav (the installed one by default) with the return and argument types declared."""
    lib = C.CDLL(path or luminamoon.c_library_path())
    for name in ("luminav_version", "luminav_last_error_message", "luminav_status_name",
                 "luminav_cpu_features", "luminav_last_backend", "luminav_backend_name",
                 "luminav_backend_unavailable_reason"):
        getattr(lib, name).restype = C.c_char_p
    lib.luminav_scratch_bytes.restype = C.c_size_t
    lib.luminav_scratch_bytes.argtypes = [C.c_size_t]
    lib.luminav_exp_avg_sq_length.restype = C.c_size_t
    lib.luminav_exp_avg_sq_length.argtypes = [C.c_uint64, C.c_uint64, C.c_int, C.c_int]
    lib.luminav_triton_engine_create.restype = C.c_void_p
    lib.luminav_triton_engine_destroy.argtypes = [C.c_void_p]
    lib.luminav_triton_get_platform.restype = C.c_char_p
    lib.luminav_triton_get_platform.argtypes = [C.c_void_p]
    lib.luminav_triton_get_arch.restype = C.c_char_p
    lib.luminav_triton_get_arch.argtypes = [C.c_void_p]
    f, i, p = C.c_float, C.c_int, C.c_void_p
    lib.luminav_triton_step_f32.argtypes = [p, p, p, p, p, p, p, C.c_size_t, f, f, f, f, f, f, f,
                                            i, i, i, f, C.c_uint64, C.c_uint32]
    return lib


def hyperparams(lib: C.CDLL, **changes) -> Hyperparams:
    """luminav_hyperparams_init's defaults with `changes` applied."""
    hp = Hyperparams()
    lib.luminav_hyperparams_init(C.byref(hp))
    for k, val in changes.items():
        setattr(hp, k, val)
    return hp


def as_hyper(hp: Hyperparams) -> Hyper:
    """The same hyperparameters for the float64 reference."""
    return Hyper(lr=hp.lr, beta1=hp.beta1, beta2=hp.beta2, eps=hp.eps, weight_decay=hp.weight_decay,
                 tau=hp.tau, lam=hp.lam, buffer_mode=hp.buffer_mode, cautious=bool(hp.cautious),
                 bound_mode=hp.bound_mode, bound_ratio=hp.bound_ratio)
