/* The matrix-multiply library, loaded at run time with dlopen so the addon builds without BLAS headers and can switch
 * between libraries: oneDNN, BLIS and OpenBLAS are all real, maintained BLAS-class libraries with different speeds on
 * different CPUs (measured on AVX-512 Zen 5 with OPENBLAS_CORETYPE=Haswell: oneDNN and BLIS/skx about 2x OpenBLAS). */
#ifndef HACRL_BLAS_H
#define HACRL_BLAS_H
#include <stdint.h>

/* Loads `name` ("onednn", "blis", "openblas"), or the first that loads in that order when name is NULL or "auto".
 * Returns 0 on success; on failure writes the reason into err. */
int hx_blas_select(const char *name, char *err, int errlen);
/* Name of the loaded library ("onednn", ...) or NULL. */
const char *hx_blas_name(void);
/* Library, version and kernel in use, e.g. "oneDNN 2.6.3 (ISA avx512_core_bf16, OpenMP)". */
const char *hx_blas_describe(void);
/* Whether `name` can be loaded here (loads and keeps the handle). */
int hx_blas_available(const char *name);

/* Row-major C = alpha·op(A)·op(B) + beta·C on `threads` threads (0 = choose from the size). */
void hx_sgemm(int transA, int transB, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
              int ldb, float beta, float *c, int ldc, int threads);
/* Row-major C = alpha·op(A)·op(B) + beta·C of bfloat16 operands (raw bits) with fp32 accumulation: oneDNN's bf16
 * kernel where the CPU runs it (hx_bf16_native), else the fp32 sgemm of the widened operands, which computes the same
 * products (exact in fp32) up to the order of the sums. Returns 0, or -1 when the widened copies cannot be allocated.
 * Not reentrant: call it outside parallel regions. */
int hx_gemm_bf16(int transA, int transB, int m, int n, int k, float alpha, const uint16_t *a, int lda,
                 const uint16_t *b, int ldb, float beta, float *c, int ldc, int threads);
/* 1 when bf16 products run on oneDNN's bf16 kernel (AMX or AVX512_BF16 CPUs with oneDNN 2.x), 0 when emulated. */
int hx_bf16_native(void);
/* Call before an OpenMP region whose threads call hx_sgemm: sets libraries with global thread settings (OpenBLAS,
 * BLIS) to one thread so concurrent calls do not fight over one pool. */
void hx_blas_enter_parallel(void);
/* Threads the size policy picks for an m×n×k product with more than HX_SKINNY_ROWS rows (compute-bound). */
int hx_gemm_threads(int m, int n, int k);
/* Products with at most this many rows (decode steps) are memory-bound on the k×n operand. */
#define HX_SKINNY_ROWS 64
/* Such a product goes to a second thread from 2 × 96 KiB of weights or 2 × 1 MFLOP: each thread then multiplies its
 * own block of columns. Timed per product shape, one against two threads (min of 600 calls, spinning OpenMP threads,
 * the other core busy with another process — docs/benchmarks.md): the 10M bench model's q/k/v product at 16 rows
 * 30 → 21 µs, its down projection 59 → 39 µs, the 1M model's [64×128]·[128×128] 10.5 → 8.7 µs; products below both
 * thresholds (e.g. [16×128]·[128×128], 4.6 → 5.0 µs) lose. (It was 1 MiB of weights and 16 MFLOP before.) */
#define HX_SKINNY_BYTES_PER_THREAD 98304.0
#define HX_SKINNY_FLOPS_PER_THREAD 1e6
/* Column blocks of a split product start on 64-byte boundaries of C's rows. */
#define HX_SPLIT_ALIGN 16
/* Threads for a product of at most HX_SKINNY_ROWS rows (by its weight bytes and its arithmetic, the larger); 1 for
 * more rows or too few columns to split. */
int hx_skinny_threads(int m, int n, int k);
/* The same count for m×n×k work of any shape (a batch of such products: k summed over them); `requested` > 0
 * overrides it, clamped to the maximum. */
int hx_skinny_work_threads(double m, double n, double k, int requested);
#endif
