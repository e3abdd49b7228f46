/* bf16 products of a few activation rows by an [out, in] weight (decode steps), on AVX512_BF16 CPUs whose oneDNN
 * has no AMX (bf16_skinny.c; blas.c decides). */
#ifndef HACRL_BF16_SKINNY_H
#define HACRL_BF16_SKINNY_H
#include <stdint.h>

/* Products with at most this many rows take the kernel below; more rows are compute-bound, oneDNN's domain. */
#define HX_BF16_SKINNY_ROWS 16

/* 1 when this build has the kernel and the CPU runs AVX512_BF16. */
int hx_bf16_skinny_ok(void);
/* Row-major C[m×n] = alpha·A[m×k]·B[n×k]ᵀ + beta·C of bfloat16 bits, fp32 accumulation, on the calling thread
 * (beta 0 ignores C's old values, NaN included). Only when hx_bf16_skinny_ok(). */
void hx_bf16_skinny_nt(int m, int n, int k, float alpha, const uint16_t *a, int lda, const uint16_t *b, int ldb,
                       float beta, float *c, int ldc);
#endif
