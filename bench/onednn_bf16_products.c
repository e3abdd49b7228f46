/* oneDNN's two ways to a bf16 product, side by side on the shapes of a qwen2.5-0.5b training step (4 × 256 tokens) and
 * of a decode step: the gemm API hacrl calls (dnnl_gemm_bf16bf16f32) and the matmul primitive (brgemm, what PyTorch
 * uses), GFLOP/s of the fastest of 4 timed products after one untimed, and whether both give the same C.
 *   gcc -O2 -fopenmp bench/onednn_bf16_products.c -o /tmp/bf16-products -ldnnl
 *   OMP_WAIT_POLICY=passive taskset -c 0,1 /tmp/bf16-products 2 [cold]
 * The first argument is the thread count; "cold" writes 512 MiB before each product so its operands come from memory
 * (as in a training step, where each product's operands were written by other kernels since their last use). */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* Exported by libdnnl 2.x but not declared in its public header. */
int dnnl_gemm_bf16bf16f32(char, char, long, long, long, float, const uint16_t *, long, const uint16_t *, long, float, float *,
                          long);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define CK(x) do { dnnl_status_t s_ = (x); if (s_ != dnnl_success) { fprintf(stderr, "%s: %d\n", #x, s_); exit(1); } } while (0)
static dnnl_engine_t eng; static dnnl_stream_t strm;
typedef struct { char ta, tb; long m, n, k; } shape;
static void md2(dnnl_memory_desc_t *md, long rows, long cols, int trans, long ld, dnnl_data_type_t dt) {
  dnnl_dims_t d = {rows, cols}, s; if (trans) { s[0] = 1; s[1] = ld; } else { s[0] = ld; s[1] = 1; }
  CK(dnnl_memory_desc_init_by_strides(md, 2, d, dt, s));
}
int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1; omp_set_num_threads(threads);
  CK(dnnl_engine_create(&eng, dnnl_cpu, 0)); CK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
  /* Rows 1,024 (4 × 256 tokens) and 2,048 (8 × 256): forward (NT: x·Wᵀ), input gradient (NN), weight gradient (TN),
   * the head over the whole vocabulary; then two products of a decode step of 16 sequences. */
  shape S[] = {{'N', 'T', 1024, 4864, 896},   {'N', 'T', 1024, 896, 896},  {'N', 'N', 1024, 896, 4864},
               {'N', 'N', 1024, 4864, 896},   {'T', 'N', 4864, 896, 1024}, {'T', 'N', 896, 4864, 1024},
               {'N', 'T', 1024, 151936, 896}, {'N', 'T', 2048, 4864, 896}, {'N', 'T', 2048, 896, 896},
               {'N', 'N', 2048, 896, 4864},   {'T', 'N', 4864, 896, 2048}, {'N', 'T', 16, 4864, 896},
               {'N', 'T', 16, 896, 4864}};
  int cold = argc > 2 && strcmp(argv[2], "cold") == 0; size_t fl_n = (size_t)512 << 20; char *flush = cold ? malloc(fl_n) : NULL;
  printf("threads %d, %s, isa %d\n", threads, cold ? "cold (512 MiB flushed before each product)" : "hot", (int)dnnl_get_effective_cpu_isa());
  for (unsigned i = 0; i < sizeof S / sizeof *S; i++) {
    shape s = S[i]; long M = s.m, N = s.n, K = s.k;
    long lda = s.ta == 'T' ? M : K, ldb = s.tb == 'T' ? K : N;
    uint16_t *a = malloc(2 * M * K), *b = malloc(2 * K * N); float *c = malloc(4 * M * N);
    for (long j = 0; j < M * K; j++) a[j] = 0x3f80 + (j * 7 % 64);
    for (long j = 0; j < K * N; j++) b[j] = 0x3f00 + (j * 13 % 64);
    double fl = 2.0 * M * N * K, best1 = 1e9, best2 = 1e9;
    // gemm API (row-major: C = A·B; dnnl_gemm_* is row-major)
    for (int r = 0; r < 5; r++) { if (cold) memset(flush, r, fl_n); double t = now(); CK(dnnl_gemm_bf16bf16f32(s.ta, s.tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, N)); t = now() - t; if (r && t < best1) best1 = t; }
    float c0 = c[M * N / 2 + 3];
    dnnl_memory_desc_t amd, bmd, cmd; md2(&amd, M, K, s.ta == 'T', lda, dnnl_bf16); md2(&bmd, K, N, s.tb == 'T', ldb, dnnl_bf16); md2(&cmd, M, N, 0, N, dnnl_f32);
    dnnl_matmul_desc_t md; CK(dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd));
    dnnl_primitive_desc_t pd; CK(dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL));
    const char *impl = NULL; dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    dnnl_primitive_t p; double tc = now(); CK(dnnl_primitive_create(&p, pd)); tc = now() - tc;
    dnnl_memory_t ma, mb, mc; CK(dnnl_memory_create(&ma, &amd, eng, a)); CK(dnnl_memory_create(&mb, &bmd, eng, b)); CK(dnnl_memory_create(&mc, &cmd, eng, c));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    memset(c, 0, 4 * M * N);
    for (int r = 0; r < 5; r++) { if (cold) memset(flush, r, fl_n); double t = now(); CK(dnnl_primitive_execute(p, strm, 3, args)); CK(dnnl_stream_wait(strm)); t = now() - t; if (r && t < best2) best2 = t; }
    printf("%c%c %5ld x %6ld x %5ld  gemm API %7.1f GFLOP/s  matmul %7.1f GFLOP/s (%s, create %.1f ms)  same %d\n", s.ta, s.tb, M, N, K, fl / best1 / 1e9, fl / best2 / 1e9, impl, tc * 1e3, c[M * N / 2 + 3] == c0);
    dnnl_primitive_destroy(p); dnnl_primitive_desc_destroy(pd); dnnl_memory_destroy(ma); dnnl_memory_destroy(mb); dnnl_memory_destroy(mc); free(a); free(b); free(c);
  }
  return 0;
}
