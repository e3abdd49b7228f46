/* The matrix-multiply library, loaded at run time with dlopen so the addon builds without BLAS headers and can switch
 * between libraries: oneDNN, BLIS and OpenBLAS are all real, maintained BLAS-class libraries with different speeds on
 * different CPUs (measured on AVX-512 Zen 5 with OPENBLAS_CORETYPE=Haswell: oneDNN and BLIS/skx about 2x OpenBLAS). */
#ifndef HACRL_BLAS_H
#define HACRL_BLAS_H

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
/* Call before an OpenMP region whose threads call hx_sgemm: sets libraries with global thread settings (OpenBLAS,
 * BLIS) to one thread so concurrent calls do not fight over one pool. */
void hx_blas_enter_parallel(void);
/* Threads the size policy picks for an m×n×k product with more than HX_SKINNY_ROWS rows (compute-bound). */
int hx_gemm_threads(int m, int n, int k);
/* Products with at most this many rows (decode steps) are memory-bound on the k×n operand. */
#define HX_SKINNY_ROWS 64
/* Weight bytes one thread streams before a second one pays for waking (1 MiB, about an L2 of this class of CPU). */
#define HX_SKINNY_BYTES_PER_THREAD 1048576.0
/* Column blocks of a split product start on 64-byte boundaries of C's rows. */
#define HX_SPLIT_ALIGN 16
/* Threads for a product of at most HX_SKINNY_ROWS rows: one per HX_SKINNY_BYTES_PER_THREAD bytes of the k×n
 * operand, or what its arithmetic alone would get when that is more (each thread multiplies its own block of
 * columns); 1 for more rows. */
int hx_skinny_threads(int m, int n, int k);
#endif
