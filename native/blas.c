#include "blas.h"
#include "bf16_skinny.h"
#include "threads.h"
#include <dlfcn.h>
#include <stdint.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                               float *, int);
typedef int (*dnnl_sgemm_fn)(char, char, long, long, long, float, const float *, long, const float *, long, float,
                             float *, long);
/* oneDNN's bf16 GEMM with fp32 accumulation (exported by libdnnl 2.x beside dnnl_sgemm, same row-major convention;
 * not in its public header). */
typedef int (*dnnl_gemm_bf16_fn)(char, char, long, long, long, float, const uint16_t *, long, const uint16_t *, long,
                                 float, float *, long);

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

/* One loadable library: where to find it and what we resolved from it. */
typedef struct {
  const char *name;
  const char *sonames[3];
  void *handle;
  cblas_sgemm_fn cblas;
  dnnl_sgemm_fn dnnl;
  void (*set_threads_int)(int);   /* openblas_set_num_threads */
  void (*set_threads_long)(long); /* bli_thread_set_num_threads */
  char describe[256];
} blas_lib;

static blas_lib libs[] = {
    {"onednn", {"libdnnl.so.3", "libdnnl.so.2", NULL}, 0, 0, 0, 0, 0, ""},
    {"blis", {"libblis.so.4", "libblis.so.3", NULL}, 0, 0, 0, 0, 0, ""},
    {"openblas", {"libopenblas.so.0", NULL, NULL}, 0, 0, 0, 0, 0, ""},
};
enum { NLIBS = sizeof libs / sizeof libs[0] };
static blas_lib *active = NULL;
static int active_threads = -1;

static const char *dnnl_isa_name(int isa) {
  switch (isa) {
  case 0x7: return "avx2";
  case 0x407: return "avx2_vnni";
  case 0x27: return "avx512_core";
  case 0x67: return "avx512_core_vnni";
  case 0xe7: return "avx512_core_bf16";
  case 0x3e7: return "avx512_core_amx";
  default: return "other";
  }
}

static void describe_onednn(blas_lib *l) {
  typedef struct { int major, minor, patch; const char *hash; unsigned cpu_runtime, gpu_runtime; } dnnl_version_t;
  const dnnl_version_t *(*version)(void) = (const dnnl_version_t *(*)(void))dlsym(l->handle, "dnnl_version");
  int (*isa)(void) = (int (*)(void))dlsym(l->handle, "dnnl_get_effective_cpu_isa");
  const dnnl_version_t *v = version ? version() : NULL;
  snprintf(l->describe, sizeof l->describe, "oneDNN %d.%d.%d sgemm (ISA %s, OpenMP threads)", v ? v->major : 0,
           v ? v->minor : 0, v ? v->patch : 0, isa ? dnnl_isa_name(isa()) : "unknown");
}

static void describe_blis(blas_lib *l) {
  /* Querying the architecture before BLIS has initialised its kernel structures aborts the process. */
  void (*init)(void) = (void (*)(void))dlsym(l->handle, "bli_init");
  if (init) init();
  int (*query)(void) = (int (*)(void))dlsym(l->handle, "bli_arch_query_id");
  const char *(*arch)(int) = (const char *(*)(int))dlsym(l->handle, "bli_arch_string");
  const char *(*ver)(void) = (const char *(*)(void))dlsym(l->handle, "bli_info_get_version_str");
  snprintf(l->describe, sizeof l->describe, "BLIS %s (kernel %s)", ver ? ver() : "?",
           query && arch ? arch(query()) : "unknown");
}

static void describe_openblas(blas_lib *l) {
  const char *(*core)(void) = (const char *(*)(void))dlsym(l->handle, "openblas_get_corename");
  const char *(*config)(void) = (const char *(*)(void))dlsym(l->handle, "openblas_get_config");
  snprintf(l->describe, sizeof l->describe, "OpenBLAS (kernel %s; %s)", core ? core() : "unknown",
           config ? config() : "");
}

/* AVX-512 with the subsets both libraries' AVX-512 kernels use (Skylake-X's: F, DQ, BW, VL). */
static int avx512_core(void) {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

/* BLIS 0.9 does not recognise Zen 5 and falls back to slow generic kernels; its AVX-512 "skx" kernels run at full
 * speed there. We only choose for the user when BLIS_ARCH_TYPE is unset: an explicit setting is always kept. */
static void prepare_blis_env(void) {
  if (getenv("BLIS_ARCH_TYPE") == NULL && avx512_core()) setenv("BLIS_ARCH_TYPE", "skx", 0);
}

/* OpenBLAS 0.3.21 picks its kernels by CPU model, and on an AVX-512 CPU whose model it does not know (an Intel Xeon with
 * AMX that a hypervisor names "Intel(R) Xeon(R) Processor") it falls back to its SSE3 "Prescott" kernels: a 512³
 * sgemm at 28 GFLOP/s on 2 threads instead of 300. Chosen by the instructions instead, and only when
 * OPENBLAS_CORETYPE is unset: an explicit setting is always kept. Cooperlake is what it detects on an AVX512_BF16 EPYC. */
static void prepare_openblas_env(void) {
  if (getenv("OPENBLAS_CORETYPE") == NULL && avx512_core())
    setenv("OPENBLAS_CORETYPE", __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX", 0);
}

static int load(blas_lib *l, char *err, int errlen) {
  if (l->handle) return 0;
  if (strcmp(l->name, "blis") == 0) prepare_blis_env();
  if (strcmp(l->name, "openblas") == 0) prepare_openblas_env();
  const char *last = "not found";
  for (int i = 0; i < 3 && l->sonames[i]; i++) {
    void *h = dlopen(l->sonames[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      last = dlerror();
      continue;
    }
    l->dnnl = (dnnl_sgemm_fn)dlsym(h, "dnnl_sgemm");
    l->cblas = (cblas_sgemm_fn)dlsym(h, "cblas_sgemm");
    l->set_threads_int = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    l->set_threads_long = (void (*)(long))dlsym(h, "bli_thread_set_num_threads");
    if (!l->dnnl && !l->cblas) {
      dlclose(h);
      last = "no sgemm entry point";
      continue;
    }
    l->handle = h;
    if (l->dnnl) describe_onednn(l);
    else if (l->set_threads_long) describe_blis(l);
    else describe_openblas(l);
    return 0;
  }
  if (err) snprintf(err, (size_t)errlen, "%s: %s", l->name, last);
  return -1;
}

static blas_lib *find(const char *name) {
  for (int i = 0; i < NLIBS; i++)
    if (strcmp(libs[i].name, name) == 0) return &libs[i];
  return NULL;
}

int hx_blas_available(const char *name) {
  blas_lib *l = find(name);
  return l && load(l, NULL, 0) == 0;
}

int hx_blas_select(const char *name, char *err, int errlen) {
  if (name && *name && strcmp(name, "auto") != 0) {
    blas_lib *l = find(name);
    if (!l) {
      snprintf(err, (size_t)errlen, "unknown BLAS \"%s\" (choose onednn, blis, openblas or auto)", name);
      return -1;
    }
    if (load(l, err, errlen)) return -1;
    active = l;
    active_threads = -1;
    return 0;
  }
  char reasons[512] = "";
  for (int i = 0; i < NLIBS; i++) {
    char e[160];
    if (load(&libs[i], e, sizeof e) == 0) {
      active = &libs[i];
      active_threads = -1;
      return 0;
    }
    strncat(reasons, e, sizeof reasons - strlen(reasons) - 3);
    strncat(reasons, "; ", sizeof reasons - strlen(reasons) - 1);
  }
  snprintf(err, (size_t)errlen, "no BLAS library could be loaded (%s) — install libdnnl-dev, libblis-dev or "
           "libopenblas-dev", reasons);
  return -1;
}

const char *hx_blas_name(void) { return active ? active->name : NULL; }
const char *hx_blas_describe(void) { return active ? active->describe : "none"; }

/* Products below about 16 MFLOP, or with fewer than 64 rows and columns to split, lose more to waking a second thread
 * than they gain (measured by bench:kernels, which prints both thread counts for each shape). */
int hx_gemm_threads(int m, int n, int k) {
  double flops = 2.0 * m * n * k;
  if (flops < 1.6e7 || (m < 64 && n < 64)) return 1;
  return hx_threads_for(flops, 8e6, 0);
}

int hx_skinny_work_threads(double m, double n, double k, int requested) {
  int by_bytes = hx_threads_for(4.0 * n * k, HX_SKINNY_BYTES_PER_THREAD, requested);
  int by_flops = hx_threads_for(2.0 * m * n * k, HX_SKINNY_FLOPS_PER_THREAD, requested);
  return by_bytes > by_flops ? by_bytes : by_flops;
}

int hx_skinny_threads(int m, int n, int k) {
  if (m > HX_SKINNY_ROWS || n < 2 * HX_SPLIT_ALIGN) return 1;
  /* On machines with many cores, at least 64 columns a thread (a product of a few µs is not worth more wake-ups;
   * only 1 and 2 threads were measured). */
  int nt = hx_skinny_work_threads(m, n, k, 0), most = n / 64 > 1 ? n / 64 : 1;
  return nt < most ? nt : most;
}

static void set_threads(int nt) {
  if (!active) return;
  if (nt == active_threads) return;
  if (active->dnnl) omp_set_num_threads(nt);
  else if (active->set_threads_long) active->set_threads_long(nt);
  else if (active->set_threads_int) active->set_threads_int(nt);
  active_threads = nt;
}

void hx_blas_enter_parallel(void) {
  if (omp_get_level() == 0) set_threads(1);
}

/* One product C = alpha·op(A)·op(B) + beta·C: float32 operands through the active library, or bfloat16 bits (both A
 * and B) through oneDNN's bf16 kernel, which accumulates in fp32. */
typedef struct {
  int ta, tb, m, n, k;
  float alpha, beta;
  const void *a, *b;
  int lda, ldb, ldc;
  float *c;
  int bf16;
} product;

static dnnl_gemm_bf16_fn bf16_kernel = NULL;
static int bf16_probed = 0;
/* Whether bf16 products of few rows by an [out, in] operand go to bf16_skinny.c rather than oneDNN (set with the
 * probe below, before any product runs). */
static int skinny_bf16 = 0;

/* oneDNN's bf16 GEMM where it runs on this CPU's instructions: oneDNN 2.x computes it on avx512_core and newer (AMX
 * and AVX512_BF16 natively) and answers "unimplemented" on older CPUs, so one 1×1×1 product decides, once. */
static dnnl_gemm_bf16_fn bf16_hardware(void) {
  if (bf16_probed) return bf16_kernel;
  bf16_probed = 1;
  blas_lib *l = find("onednn");
  if (!l || load(l, NULL, 0)) return NULL;
  dnnl_gemm_bf16_fn f = (dnnl_gemm_bf16_fn)dlsym(l->handle, "dnnl_gemm_bf16bf16f32");
  uint16_t one = 0x3f80; /* 1.0 */
  float c = 0.0f;
  if (f && f('N', 'N', 1, 1, 1, 1.0f, &one, 1, &one, 1, 0.0f, &c, 1) == 0 && c == 1.0f) bf16_kernel = f;
  /* Only where oneDNN has no AMX: the kernel was measured against oneDNN's AVX512_BF16 path, and AMX tiles multiply
   * 16 rows at a time, so there oneDNN's is likely the faster (not measured). */
  int (*isa)(void) = (int (*)(void))dlsym(l->handle, "dnnl_get_effective_cpu_isa");
  skinny_bf16 = bf16_kernel && hx_bf16_skinny_ok() && !(isa && strcmp(dnnl_isa_name(isa()), "avx512_core_amx") == 0);
  return bf16_kernel;
}

int hx_bf16_native(void) { return bf16_hardware() != NULL; }

/* Threads of the library that computes `p`: oneDNN's bf16 kernel follows OpenMP's setting whatever the active
 * library is, which is then also oneDNN's sgemm setting (the cache must know). */
static void product_threads(const product *p, int nt) {
  if (!p->bf16) {
    set_threads(nt);
    return;
  }
  omp_set_num_threads(nt);
  if (active && active->dnnl) active_threads = nt;
}

/* `p` through its library on the calling thread's settings (see run_product for the threads). */
static void call_library(const product *p) {
  char ta = p->ta ? 'T' : 'N', tb = p->tb ? 'T' : 'N';
  if (p->bf16 && skinny_bf16 && !p->ta && p->tb && p->m <= HX_BF16_SKINNY_ROWS)
    hx_bf16_skinny_nt(p->m, p->n, p->k, p->alpha, p->a, p->lda, p->b, p->ldb, p->beta, p->c, p->ldc);
  else if (p->bf16)
    bf16_kernel(ta, tb, p->m, p->n, p->k, p->alpha, p->a, p->lda, p->b, p->ldb, p->beta, p->c, p->ldc);
  else if (active->dnnl)
    active->dnnl(ta, tb, p->m, p->n, p->k, p->alpha, p->a, p->lda, p->b, p->ldb, p->beta, p->c, p->ldc);
  else
    active->cblas(ROW_MAJOR, p->ta ? TRANS : NO_TRANS, p->tb ? TRANS : NO_TRANS, p->m, p->n, p->k, p->alpha, p->a,
                  p->lda, p->b, p->ldb, p->beta, p->c, p->ldc);
}

/* A product with few rows reads every weight once for very little arithmetic: memory-bound, and the libraries
 * parallelise it poorly (a second thread made batch-16 decoding slower than one). Each thread takes its own block of
 * C's columns, i.e. its own share of the weight bytes, and multiplies it on one library thread. */
static void column_split(const product *p, int nt) {
  int blocks = p->n / HX_SPLIT_ALIGN;
  size_t elem = p->bf16 ? sizeof(uint16_t) : sizeof(float);
  hx_blas_enter_parallel();
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), parts = omp_get_num_threads();
    int j0 = (int)((long)blocks * t / parts) * HX_SPLIT_ALIGN;
    int j1 = t == parts - 1 ? p->n : (int)((long)blocks * (t + 1) / parts) * HX_SPLIT_ALIGN;
    if (active->dnnl || p->bf16) omp_set_num_threads(1);
    if (j1 > j0) {
      product part = *p;
      part.n = j1 - j0;
      part.b = (const char *)p->b + (p->tb ? (size_t)j0 * p->ldb : (size_t)j0) * elem;
      part.c = p->c + j0;
      call_library(&part);
    }
  }
}

/* `p` on `threads` threads (0 = chosen from the size; see hx_sgemm). */
static void compute_product(const product *p, int threads) {
  if (p->m <= 0 || p->n <= 0) return;
  if (p->k <= 0) { /* BLAS leaves C·beta; do it here so every library agrees, including beta = 0 over NaN. */
    for (int i = 0; i < p->m; i++)
      for (int j = 0; j < p->n; j++) {
        float *c = p->c + (long)i * p->ldc + j;
        *c = p->beta == 0.0f ? 0.0f : p->beta * *c;
      }
    return;
  }
  if (omp_get_level() > 0) {
    /* Inside an OpenMP region (a kernel parallel over heads), even an inactive one-thread region, the library must
     * not open teams of its own. oneDNN follows this task's private OpenMP setting, which is set here and never
     * cached; OpenBLAS and BLIS have global settings, which hx_blas_enter_parallel() set to one thread before. */
    if (active->dnnl || p->bf16) omp_set_num_threads(1);
    call_library(p);
    return;
  }
  if (threads <= 0 && p->m <= HX_SKINNY_ROWS) {
    int nt = hx_skinny_threads(p->m, p->n, p->k);
    if (nt > 1) {
      column_split(p, nt);
      return;
    }
    product_threads(p, 1);
  } else
    product_threads(p, threads > 0 ? hx_threads_for(1, 1, threads) : hx_gemm_threads(p->m, p->n, p->k));
  call_library(p);
}

/* Products of at least this many multiply-adds (m·n·k) hold the stop signals back: about 4 MFLOP, 80 µs or more,
 * against 2.2 µs for the two sigprocmask calls (measured on a 2-core AMD EPYC VM), so decoding's many small
 * products pay nothing; they are a small share of the time a signal can land in. */
#define HX_MASK_SIGNALS_MIN (1L << 21)

/* compute_product with SIGINT and SIGTERM held back on the calling thread. A stop signal delivered to a thread inside
 * oneDNN's sgemm corrupted the heap now and then (glibc aborted in the free at the end of dnnl_sgemm: about 1 run in 8
 * with a SIGTERM during a step; never with OpenBLAS, never without a signal); held back, the kernel hands the signal
 * to another thread of the process or delivers it when the product is done. */
static void run_product(const product *p, int threads) {
  if ((long)p->m * p->n * p->k < HX_MASK_SIGNALS_MIN) {
    compute_product(p, threads);
    return;
  }
  sigset_t stops, before;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stops, &before);
  compute_product(p, threads);
  pthread_sigmask(SIG_SETMASK, &before, NULL);
}

void hx_sgemm(int transA, int transB, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
              int ldb, float beta, float *c, int ldc, int threads) {
  product p = {transA, transB, m, n, k, alpha, beta, a, b, lda, ldb, ldc, c, 0};
  run_product(&p, threads);
}

/* Grow-only scratch the emulated bf16 product widens its operands into (one per operand). */
static float *widened[2];
static size_t widened_len[2];

/* The first `count` bfloat16 values of `bits` as float32 (exact: a bfloat16 is the top half of a float32), in the
 * scratch of `slot`; NULL when it cannot be allocated. */
static const float *widen(int slot, const uint16_t *bits, size_t count) {
  if (widened_len[slot] < count) {
    float *grown = realloc(widened[slot], count * sizeof(float));
    if (!grown) return NULL;
    widened[slot] = grown;
    widened_len[slot] = count;
  }
  uint32_t *out = (uint32_t *)widened[slot];
  for (size_t i = 0; i < count; i++) out[i] = (uint32_t)bits[i] << 16;
  return widened[slot];
}

int hx_gemm_bf16(int transA, int transB, int m, int n, int k, float alpha, const uint16_t *a, int lda,
                 const uint16_t *b, int ldb, float beta, float *c, int ldc, int threads) {
  if (bf16_hardware()) {
    product p = {transA, transB, m, n, k, alpha, beta, a, b, lda, ldb, ldc, c, 1};
    run_product(&p, threads);
    return 0;
  }
  /* No bf16 instructions: the same products from the widened operands (a bf16 × bf16 product is exact in fp32). */
  size_t aLen = m && k ? (size_t)((transA ? k : m) - 1) * lda + (transA ? m : k) : 0;
  size_t bLen = n && k ? (size_t)((transB ? n : k) - 1) * ldb + (transB ? k : n) : 0;
  const float *wa = aLen ? widen(0, a, aLen) : NULL, *wb = bLen ? widen(1, b, bLen) : NULL;
  if ((aLen && !wa) || (bLen && !wb)) return -1;
  hx_sgemm(transA, transB, m, n, k, alpha, wa, lda, wb, ldb, beta, c, ldc, threads);
  return 0;
}

int hx_max_threads(void) {
  const char *s = getenv("HACRL_THREADS");
  int n = s ? atoi(s) : 0;
  if (n <= 0) n = omp_get_num_procs();
  return n < 1 ? 1 : n;
}

int hx_threads_for(double work, double per_thread, int requested) {
  int max = hx_max_threads();
  if (requested > 0) return requested < max ? requested : max;
  int n = (int)(work / per_thread);
  if (n < 1) n = 1;
  return n < max ? n : max;
}
