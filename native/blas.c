#include "blas.h"
#include "threads.h"
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                               float *, int);
typedef int (*dnnl_sgemm_fn)(char, char, long, long, long, float, const float *, long, const float *, long, float,
                             float *, long);

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

/* BLIS 0.9 does not recognise Zen 5 and falls back to slow generic kernels; its AVX-512 "skx" kernels run at full
 * speed there. We only choose for the user when BLIS_ARCH_TYPE is unset: an explicit setting is always kept. */
static void prepare_blis_env(void) {
  if (getenv("BLIS_ARCH_TYPE") == NULL && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    setenv("BLIS_ARCH_TYPE", "skx", 0);
}

static int load(blas_lib *l, char *err, int errlen) {
  if (l->handle) return 0;
  if (strcmp(l->name, "blis") == 0) prepare_blis_env();
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

/* One product through the library on the calling thread's settings (see hx_sgemm for the threads). */
static void call_library(int transA, int transB, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc) {
  if (active->dnnl)
    active->dnnl(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    active->cblas(ROW_MAJOR, transA ? TRANS : NO_TRANS, transB ? TRANS : NO_TRANS, m, n, k, alpha, a, lda, b, ldb,
                  beta, c, ldc);
}

/* A product with few rows reads every weight once for very little arithmetic: memory-bound, and the libraries
 * parallelise it poorly (a second thread made batch-16 decoding slower than one). Each thread takes its own block of
 * C's columns, i.e. its own share of the weight bytes, and multiplies it on one library thread. */
static void sgemm_column_split(int transA, int transB, int m, int n, int k, float alpha, const float *a, int lda,
                               const float *b, int ldb, float beta, float *c, int ldc, int nt) {
  int blocks = n / HX_SPLIT_ALIGN;
  hx_blas_enter_parallel();
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), parts = omp_get_num_threads();
    int j0 = (int)((long)blocks * t / parts) * HX_SPLIT_ALIGN;
    int j1 = t == parts - 1 ? n : (int)((long)blocks * (t + 1) / parts) * HX_SPLIT_ALIGN;
    if (active->dnnl) omp_set_num_threads(1);
    if (j1 > j0)
      call_library(transA, transB, m, j1 - j0, k, alpha, a, lda, transB ? b + (long)j0 * ldb : b + j0, ldb, beta,
                   c + j0, ldc);
  }
}

void hx_sgemm(int transA, int transB, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
              int ldb, float beta, float *c, int ldc, int threads) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) { /* BLAS leaves C·beta; do it here so every library agrees, including beta = 0 over NaN. */
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) c[(long)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(long)i * ldc + j];
    return;
  }
  if (omp_get_level() > 0) {
    /* Inside an OpenMP region (a kernel parallel over heads), even an inactive one-thread region, the library must
     * not open teams of its own. oneDNN follows this task's private OpenMP setting, which is set here and never
     * cached; OpenBLAS and BLIS have global settings, which hx_blas_enter_parallel() set to one thread before. */
    if (active->dnnl) omp_set_num_threads(1);
    call_library(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (threads <= 0 && m <= HX_SKINNY_ROWS) {
    int nt = hx_skinny_threads(m, n, k);
    if (nt > 1) {
      sgemm_column_split(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nt);
      return;
    }
    set_threads(1);
  } else
    set_threads(threads > 0 ? hx_threads_for(1, 1, threads) : hx_gemm_threads(m, n, k));
  call_library(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
