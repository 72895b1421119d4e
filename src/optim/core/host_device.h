// Marks functions that compile for the host and, under nvcc/hipcc, the device.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define LUMINAV_HD __host__ __device__ __forceinline__
#else
#define LUMINAV_HD inline
#endif
