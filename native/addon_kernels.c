/* N-API glue of the fused kernels: one JS function per method of the Kernels interface (src/backend/kernels.ts), with
 * the same names and positional arguments; attention and attentionBackward take the AttentionShape flattened
 * (batch, seqLen, queryHeads, kvHeads, headDim, scale, keyStart?). The kernels trust their arguments, so everything
 * they rely on is checked here — types, lengths against the shapes, ids and offsets in range — and a bad call throws
 * a JS Error naming the op and the argument instead of touching memory it does not own. */
#include "blas.h"
#include "kernels.h"
#include "entropy.h"
#include "napi_util.h"
#include "repro.h"
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

enum { MAX_ARGS = 16 };

/* One call in progress. Once a check has thrown, `failed` is set and later checks do nothing, so the first problem is
 * the one reported and the kernel is not run. */
typedef struct {
  napi_env env;
  const char *op;
  napi_value argv[MAX_ARGS];
  int failed;
  napi_value result; /* NULL: the call returns undefined */
} call_t;

static int ok(const call_t *c) { return !c->failed; }

static void fail(call_t *c, const char *fmt, ...) {
  if (c->failed) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  hx_throw(c->env, c->op, "%s", msg);
  c->failed = 1;
}

/* Records the result of a napi_util getter, which has already thrown when it returns non-zero. */
static void check(call_t *c, int rc) {
  if (rc) c->failed = 1;
}

/* Kernels that allocate scratch return -1 when they could not. */
static void done(call_t *c, int rc) {
  if (rc) fail(c, "out of memory for the kernel's scratch buffers");
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Argument getters: each takes the argument's position and name and returns a zero value after a failure.          */

static int64_t size_at(call_t *c, int i, const char *name) {
  int64_t v = 0;
  if (ok(c)) check(c, hx_size(c->env, c->argv[i], c->op, name, &v));
  return v;
}

static double number_at(call_t *c, int i, const char *name) {
  double v = 0;
  if (ok(c)) check(c, hx_double(c->env, c->argv[i], c->op, name, &v));
  return v;
}

static int bool_at(call_t *c, int i, const char *name) {
  int v = 0;
  if (ok(c)) check(c, hx_bool(c->env, c->argv[i], c->op, name, &v));
  return v;
}

static int absent(call_t *c, int i) {
  napi_valuetype t = napi_undefined;
  napi_typeof(c->env, c->argv[i], &t);
  return t == napi_undefined || t == napi_null;
}

/* A Float32Array of any length; its length goes to *len. */
static float *f32_any(call_t *c, int i, const char *name, size_t *len) {
  float *p = NULL;
  *len = 0;
  if (ok(c)) check(c, hx_f32(c->env, c->argv[i], c->op, name, &p, len));
  return p;
}

/* A Float32Array holding at least `need` elements. */
static float *f32_at(call_t *c, int i, const char *name, int64_t need) {
  size_t len;
  float *p = f32_any(c, i, name, &len);
  if (ok(c)) check(c, hx_need(c->env, c->op, name, len, need));
  return p;
}

static int32_t *i32_at(call_t *c, int i, const char *name, int64_t need) {
  int32_t *p = NULL;
  size_t len = 0;
  if (ok(c)) check(c, hx_i32(c->env, c->argv[i], c->op, name, &p, &len) || hx_need(c->env, c->op, name, len, need));
  return p;
}

/* a·b, failing when it leaves the integers a JS number holds exactly (no shape that large fits in memory). */
static int64_t product(call_t *c, int64_t a, int64_t b) {
  int64_t p = 0;
  if (ok(c) && (__builtin_mul_overflow(a, b, &p) || p > ((int64_t)1 << 53))) {
    fail(c, "the shape %lld × %lld is too large", (long long)a, (long long)b);
    p = 0;
  }
  return p;
}

static int64_t product3(call_t *c, int64_t a, int64_t b, int64_t d) { return product(c, product(c, a, b), d); }

/* Dimensions handed to sgemm or used as int indices. */
static void fits_int(call_t *c, const char *what, int64_t v) {
  if (ok(c) && v > INT_MAX) fail(c, "%s = %lld exceeds 2^31 − 1", what, (long long)v);
}

/* ids[0..rows) in [0, limit) — or negative, where that means "ignored" — else an error naming the row and the id. */
static void ids_below(call_t *c, const int32_t *ids, int64_t rows, int64_t limit, int negative_ok, const char *what) {
  for (int64_t r = 0; ok(c) && r < rows; r++)
    if (ids[r] >= limit || (ids[r] < 0 && !negative_ok))
      fail(c, "%s %d at row %lld is outside [0, %lld)", what, ids[r], (long long)r, (long long)limit);
}

/* The optional keyStart at position i: NULL, or [batch] values in [0, limit]. */
static const int32_t *key_start_at(call_t *c, int i, int64_t batch, int64_t limit) {
  if (!ok(c) || absent(c, i)) return NULL;
  const int32_t *ks = i32_at(c, i, "keyStart", batch);
  for (int64_t b = 0; ok(c) && b < batch; b++)
    if (ks[b] < 0 || ks[b] > limit)
      fail(c, "keyStart[%lld] = %d is outside [0, %lld]", (long long)b, ks[b], (long long)limit);
  return ks;
}

static void heads_divide(call_t *c, int64_t q_heads, int64_t kv_heads) {
  if (ok(c) && (kv_heads == 0 || q_heads % kv_heads != 0))
    fail(c, "queryHeads %lld must be a multiple of kvHeads %lld (≥ 1)", (long long)q_heads, (long long)kv_heads);
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Shared argument patterns                                                                                         */

/* count Float32Arrays at positions 0..count-1, then n: every array needs n elements. Returns whether all is well. */
static int elementwise(call_t *c, const char *const *names, int count, float **arrays, int64_t *n) {
  *n = size_at(c, count, "n");
  for (int i = 0; i < count; i++) arrays[i] = f32_at(c, i, names[i], *n);
  return ok(c);
}

/* (x, out, rows, dim) with x and out [rows, dim]. */
static void rowwise(call_t *c, void (*kernel)(const float *, float *, int64_t, int64_t)) {
  int64_t rows = size_at(c, 2, "rows"), dim = size_at(c, 3, "dim"), n = product(c, rows, dim);
  float *x = f32_at(c, 0, "x", n), *out = f32_at(c, 1, "out", n);
  if (ok(c)) kernel(x, out, rows, dim);
}

/* The attention geometry at positions i..i+6 (batch, seqLen, queryHeads, kvHeads, headDim, scale, keyStart?) and the
 * element counts of q-shaped, kv-shaped and lse arrays. */
typedef struct {
  hx_attn_shape shape;
  int64_t nq, nkv, nlse;
} attn_args;

static attn_args attn_args_at(call_t *c, int i) {
  attn_args a = {{0}, 0, 0, 0};
  int64_t b = size_at(c, i, "batch"), t = size_at(c, i + 1, "seqLen"), hq = size_at(c, i + 2, "queryHeads");
  int64_t hkv = size_at(c, i + 3, "kvHeads"), d = size_at(c, i + 4, "headDim");
  double scale = number_at(c, i + 5, "scale");
  heads_divide(c, hq, hkv);
  fits_int(c, "seqLen", t);
  fits_int(c, "batch·queryHeads", product(c, b, hq));
  fits_int(c, "queryHeads·headDim", product(c, hq, d));
  a.shape.key_start = key_start_at(c, i + 6, b, t);
  a.nq = product3(c, b, t, product(c, hq, d));
  a.nkv = product3(c, b, t, product(c, hkv, d));
  a.nlse = product3(c, b, hq, t);
  if (ok(c)) {
    a.shape.batch = (int)b;
    a.shape.seq = (int)t;
    a.shape.q_heads = (int)hq;
    a.shape.kv_heads = (int)hkv;
    a.shape.head_dim = (int)d;
    a.shape.scale = (float)scale;
  }
  return a;
}

/* The attention products go through hx_sgemm: load the BLAS the way init() does when JS has not called it yet. */
static int blas_ready(call_t *c) {
  char err[640];
  if (ok(c) && !hx_blas_name() && hx_blas_select(getenv("HACRL_BLAS"), err, sizeof err)) fail(c, "%s", err);
  return ok(c);
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* One handler per kernel; arguments are named as in the Kernels interface.                                         */

/* The fast kernel, or its reproducible twin (the `slot` of repro.h's table, same signature) while that mode is on. */
#define PICK(fast, slot) (hx_repro ? hx_repro->slot : (fast))

static void do_rms_norm(call_t *c) {
  int64_t rows = size_at(c, 4, "rows"), dim = size_at(c, 5, "dim"), n = product(c, rows, dim);
  double eps = number_at(c, 6, "eps");
  float *x = f32_at(c, 0, "x", n), *w = f32_at(c, 1, "weight", dim), *out = f32_at(c, 2, "out", n);
  float *inv = f32_at(c, 3, "invRms", rows);
  if (ok(c)) PICK(hx_rms_norm, rms_norm)(x, w, out, inv, rows, dim, eps);
}

static void do_rms_norm_backward(call_t *c) {
  int64_t rows = size_at(c, 6, "rows"), dim = size_at(c, 7, "dim"), n = product(c, rows, dim);
  float *dy = f32_at(c, 0, "dy", n), *x = f32_at(c, 1, "x", n), *w = f32_at(c, 2, "weight", dim);
  float *inv = f32_at(c, 3, "invRms", rows), *dx = f32_at(c, 4, "dx", n), *dw = f32_at(c, 5, "dWeight", dim);
  if (ok(c)) done(c, PICK(hx_rms_norm_backward, rms_norm_backward)(dy, x, w, inv, dx, dw, rows, dim));
}

static void do_layer_norm(call_t *c) {
  int64_t rows = size_at(c, 6, "rows"), dim = size_at(c, 7, "dim"), n = product(c, rows, dim);
  double eps = number_at(c, 8, "eps");
  float *x = f32_at(c, 0, "x", n), *w = f32_at(c, 1, "weight", dim), *bias = f32_at(c, 2, "bias", dim);
  float *out = f32_at(c, 3, "out", n), *mean = f32_at(c, 4, "mean", rows), *rstd = f32_at(c, 5, "rstd", rows);
  if (ok(c)) PICK(hx_layer_norm, layer_norm)(x, w, bias, out, mean, rstd, rows, dim, eps);
}

static void do_layer_norm_backward(call_t *c) {
  int64_t rows = size_at(c, 8, "rows"), dim = size_at(c, 9, "dim"), n = product(c, rows, dim);
  float *dy = f32_at(c, 0, "dy", n), *x = f32_at(c, 1, "x", n), *w = f32_at(c, 2, "weight", dim);
  float *mean = f32_at(c, 3, "mean", rows), *rstd = f32_at(c, 4, "rstd", rows), *dx = f32_at(c, 5, "dx", n);
  float *dw = f32_at(c, 6, "dWeight", dim), *db = f32_at(c, 7, "dBias", dim);
  if (ok(c)) done(c, PICK(hx_layer_norm_backward, layer_norm_backward)(dy, x, w, mean, rstd, dx, dw, db, rows, dim));
}

static void do_softmax(call_t *c) { rowwise(c, PICK(hx_softmax, softmax)); }
static void do_log_softmax(call_t *c) { rowwise(c, PICK(hx_log_softmax, log_softmax)); }

static void do_argmax_rows(call_t *c) {
  int64_t rows = size_at(c, 2, "rows"), dim = size_at(c, 3, "dim");
  float *x = f32_at(c, 0, "x", product(c, rows, dim));
  int32_t *out = i32_at(c, 1, "out", rows);
  if (ok(c)) hx_argmax_rows(x, out, rows, dim);
}

static void do_gather_log_probs(call_t *c) {
  int64_t rows = size_at(c, 4, "rows"), vocab = size_at(c, 5, "vocab");
  float *logits = f32_at(c, 0, "logits", product(c, rows, vocab));
  const int32_t *targets = i32_at(c, 1, "targets", rows);
  float *logp = f32_at(c, 2, "logProb", rows), *lse = f32_at(c, 3, "lse", rows);
  float *entropy = ok(c) && !absent(c, 6) ? f32_at(c, 6, "entropy", rows) : NULL;
  if (ok(c)) ids_below(c, targets, rows, vocab, 1, "target");
  if (ok(c)) PICK(hx_gather_log_probs, gather_log_probs)(logits, targets, logp, lse, entropy, rows, vocab);
}

static void do_gather_log_probs_backward(call_t *c) {
  int64_t rows = size_at(c, 5, "rows"), vocab = size_at(c, 6, "vocab"), n = product(c, rows, vocab);
  float *logits = f32_at(c, 0, "logits", n);
  const int32_t *targets = i32_at(c, 1, "targets", rows);
  float *lse = f32_at(c, 2, "lse", rows), *dlogp = f32_at(c, 3, "dLogProb", rows), *dlogits = f32_at(c, 4, "dLogits", n);
  if (ok(c)) ids_below(c, targets, rows, vocab, 1, "target");
  if (ok(c))
    PICK(hx_gather_log_probs_backward, gather_log_probs_backward)(logits, targets, lse, dlogp, dlogits, rows, vocab);
}

static void do_entropy_backward(call_t *c) {
  int64_t rows = size_at(c, 5, "rows"), vocab = size_at(c, 6, "vocab"), n = product(c, rows, vocab);
  float *logits = f32_at(c, 0, "logits", n), *lse = f32_at(c, 1, "lse", rows), *h = f32_at(c, 2, "entropy", rows);
  float *dh = f32_at(c, 3, "dEntropy", rows), *dlogits = f32_at(c, 4, "dLogits", n);
  if (ok(c) && dlogits == logits) fail(c, "dLogits must not alias logits");
  if (ok(c)) PICK(hx_entropy_backward, entropy_backward)(logits, lse, h, dh, dlogits, rows, vocab);
}

static void do_rope(call_t *c) {
  int64_t rows = size_at(c, 4, "rows"), heads = size_at(c, 5, "heads"), hd = size_at(c, 6, "headDim");
  int inverse = bool_at(c, 7, "inverse");
  if (ok(c) && hd % 2 != 0) fail(c, "headDim %lld must be even", (long long)hd);
  float *x = f32_at(c, 0, "x", product3(c, rows, heads, hd));
  const int32_t *pos = i32_at(c, 1, "positions", rows);
  size_t ncos, nsin;
  float *cos = f32_any(c, 2, "cos", &ncos), *sin = f32_any(c, 3, "sin", &nsin);
  /* Positions index rows of both tables; with headDim 0 nothing is read. */
  if (ok(c) && hd > 0) ids_below(c, pos, rows, (int64_t)(ncos < nsin ? ncos : nsin) / (hd / 2), 0, "position");
  if (ok(c)) PICK(hx_rope, rope)(x, pos, cos, sin, rows, heads, hd, inverse);
}

static void do_swiglu(call_t *c) {
  static const char *const names[] = {"gate", "up", "out"};
  float *a[3];
  int64_t n;
  if (elementwise(c, names, 3, a, &n)) PICK(hx_swiglu, swiglu)(a[0], a[1], a[2], n);
}

static void do_swiglu_backward(call_t *c) {
  static const char *const names[] = {"dy", "gate", "up", "dGate", "dUp"};
  float *a[5];
  int64_t n;
  if (elementwise(c, names, 5, a, &n)) PICK(hx_swiglu_backward, swiglu_backward)(a[0], a[1], a[2], a[3], a[4], n);
}

static void do_gelu(call_t *c) {
  static const char *const names[] = {"x", "out"};
  float *a[2];
  int64_t n;
  if (elementwise(c, names, 2, a, &n)) PICK(hx_gelu, gelu)(a[0], a[1], n);
}

static void do_gelu_backward(call_t *c) {
  static const char *const names[] = {"dy", "x", "dx"};
  float *a[3];
  int64_t n;
  if (elementwise(c, names, 3, a, &n)) PICK(hx_gelu_backward, gelu_backward)(a[0], a[1], a[2], n);
}

static void do_attention(call_t *c) {
  attn_args a = attn_args_at(c, 5);
  float *q = f32_at(c, 0, "q", a.nq), *k = f32_at(c, 1, "k", a.nkv), *v = f32_at(c, 2, "v", a.nkv);
  float *out = f32_at(c, 3, "out", a.nq), *lse = f32_at(c, 4, "lse", a.nlse);
  if (blas_ready(c)) done(c, PICK(hx_attention, attention)(q, k, v, out, lse, &a.shape));
}

static void do_attention_backward(call_t *c) {
  attn_args a = attn_args_at(c, 9);
  float *dout = f32_at(c, 0, "dOut", a.nq), *q = f32_at(c, 1, "q", a.nq), *k = f32_at(c, 2, "k", a.nkv);
  float *v = f32_at(c, 3, "v", a.nkv), *out = f32_at(c, 4, "out", a.nq), *lse = f32_at(c, 5, "lse", a.nlse);
  float *dq = f32_at(c, 6, "dq", a.nq), *dk = f32_at(c, 7, "dk", a.nkv), *dv = f32_at(c, 8, "dv", a.nkv);
  if (blas_ready(c))
    done(c, PICK(hx_attention_backward, attention_backward)(dout, q, k, v, out, lse, dq, dk, dv, &a.shape));
}

static void do_attention_decode(call_t *c) {
  int64_t b = size_at(c, 4, "batch"), hq = size_at(c, 5, "queryHeads"), hkv = size_at(c, 6, "kvHeads");
  int64_t d = size_at(c, 7, "headDim"), cap = size_at(c, 8, "capacity"), len = size_at(c, 9, "length");
  double scale = number_at(c, 10, "scale");
  heads_divide(c, hq, hkv);
  fits_int(c, "batch·queryHeads", product(c, b, hq));
  fits_int(c, "queryHeads·headDim", product(c, hq, d));
  if (ok(c) && len > cap) fail(c, "length %lld exceeds the cache capacity %lld", (long long)len, (long long)cap);
  const int32_t *ks = key_start_at(c, 11, b, len);
  int64_t nq = product3(c, b, hq, d), ncache = product3(c, product(c, b, hkv), cap, d);
  float *q = f32_at(c, 0, "q", nq), *kc = f32_at(c, 1, "kCache", ncache), *vc = f32_at(c, 2, "vCache", ncache);
  float *out = f32_at(c, 3, "out", nq);
  if (ok(c))
    done(c, PICK(hx_attention_decode, attention_decode)(q, kc, vc, out, b, hq, hkv, d, cap, len, (float)scale, ks));
}

static void do_adamw(call_t *c) {
  int64_t n = size_at(c, 4, "n"), step = size_at(c, 10, "step");
  double lr = number_at(c, 5, "lr"), b1 = number_at(c, 6, "beta1"), b2 = number_at(c, 7, "beta2");
  double eps = number_at(c, 8, "eps"), wd = number_at(c, 9, "weightDecay");
  if (ok(c) && step < 1) fail(c, "step must be ≥ 1, got %lld", (long long)step);
  float *p = f32_at(c, 0, "param", n), *g = f32_at(c, 1, "grad", n), *m = f32_at(c, 2, "m", n);
  float *v = f32_at(c, 3, "v", n);
  if (ok(c)) PICK(hx_adamw, adamw)(p, g, m, v, n, lr, b1, b2, eps, wd, step);
}

static void do_add_bias(call_t *c) {
  int64_t rows = size_at(c, 3, "rows"), dim = size_at(c, 4, "dim"), n = product(c, rows, dim);
  float *x = f32_at(c, 0, "x", n), *bias = f32_at(c, 1, "bias", dim), *out = f32_at(c, 2, "out", n);
  if (ok(c)) hx_add_bias(x, bias, out, rows, dim);
}

static void do_sum_rows(call_t *c) {
  int64_t rows = size_at(c, 2, "rows"), dim = size_at(c, 3, "dim");
  float *dy = f32_at(c, 0, "dy", product(c, rows, dim)), *db = f32_at(c, 1, "dBias", dim);
  if (ok(c)) done(c, PICK(hx_sum_rows, sum_rows)(dy, db, rows, dim));
}

static void do_axpy(call_t *c) {
  double alpha = number_at(c, 0, "alpha");
  int64_t n = size_at(c, 3, "n");
  float *x = f32_at(c, 1, "x", n), *y = f32_at(c, 2, "y", n);
  if (ok(c)) PICK(hx_axpy, axpy)((float)alpha, x, y, n);
}

static void do_mul(call_t *c) {
  static const char *const names[] = {"a", "b", "out"};
  float *a[3];
  int64_t n;
  if (elementwise(c, names, 3, a, &n)) hx_mul(a[0], a[1], a[2], n);
}

static void do_scale(call_t *c) {
  double alpha = number_at(c, 1, "alpha");
  int64_t n = size_at(c, 2, "n");
  float *x = f32_at(c, 0, "x", n);
  if (ok(c)) hx_scale(x, (float)alpha, n);
}

static void do_round_bf16(call_t *c) {
  int64_t n = size_at(c, 2, "n");
  float *x = f32_at(c, 0, "x", n);
  uint16_t *out = NULL;
  size_t len = 0;
  if (ok(c)) check(c, hx_u16(c->env, c->argv[1], c->op, "out", &out, &len) || hx_need(c->env, c->op, "out", len, n));
  if (ok(c)) hx_round_bf16(x, out, n);
}

static const char *const x_only[] = {"x"};

static void do_sum_squares(call_t *c) {
  float *x;
  int64_t n;
  if (elementwise(c, x_only, 1, &x, &n)) c->result = hx_number(c->env, PICK(hx_sum_squares, sum_squares)(x, n));
}

static void do_all_finite(call_t *c) {
  float *x;
  int64_t n;
  if (elementwise(c, x_only, 1, &x, &n)) c->result = hx_boolean(c->env, hx_all_finite(x, n));
}

/* The table's rows are its length over dim; every id must name one. */
/* copyRows(src, srcOffset, srcLd, dst, dstOffset, dstLd, rows, cols): every row read and written in bounds. */
static void do_copy_rows(call_t *c) {
  int64_t so = size_at(c, 1, "srcOffset"), sld = size_at(c, 2, "srcLd"), dof = size_at(c, 4, "dstOffset");
  int64_t dld = size_at(c, 5, "dstLd"), rows = size_at(c, 6, "rows"), cols = size_at(c, 7, "cols");
  int64_t last = rows > 0 ? rows - 1 : 0;
  int64_t src_need = rows > 0 ? so + product(c, last, sld) + cols : 0;
  int64_t dst_need = rows > 0 ? dof + product(c, last, dld) + cols : 0;
  float *src = f32_at(c, 0, "src", src_need), *dst = f32_at(c, 3, "dst", dst_need);
  if (ok(c) && rows > 1 && (sld < cols || dld < cols))
    fail(c, "srcLd %lld and dstLd %lld must be at least cols %lld", (long long)sld, (long long)dld, (long long)cols);
  if (ok(c)) hx_copy_rows(src + so, sld, dst + dof, dld, rows, cols);
}

static void do_embedding(call_t *c) {
  int64_t rows = size_at(c, 3, "rows"), dim = size_at(c, 4, "dim");
  size_t ntable;
  float *table = f32_any(c, 0, "table", &ntable);
  const int32_t *ids = i32_at(c, 1, "ids", rows);
  float *out = f32_at(c, 2, "out", product(c, rows, dim));
  ids_below(c, ids, rows, dim > 0 ? (int64_t)ntable / dim : 0, 0, "token id");
  if (ok(c)) hx_embedding(table, ids, out, rows, dim);
}

static void do_embedding_backward(call_t *c) {
  int64_t rows = size_at(c, 3, "rows"), dim = size_at(c, 4, "dim");
  float *dout = f32_at(c, 0, "dOut", product(c, rows, dim));
  const int32_t *ids = i32_at(c, 1, "ids", rows);
  size_t ntable;
  float *dtable = f32_any(c, 2, "dTable", &ntable);
  ids_below(c, ids, rows, dim > 0 ? (int64_t)ntable / dim : 0, 0, "token id");
  if (ok(c)) hx_embedding_backward(dout, ids, dtable, rows, dim);
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Registration                                                                                                     */

/* JS name, handler, fewest and most arguments. */
#define KERNELS(X)                                                                                                     \
  X("rmsNorm", do_rms_norm, 7, 7)                                                                                      \
  X("rmsNormBackward", do_rms_norm_backward, 8, 8)                                                                     \
  X("layerNorm", do_layer_norm, 9, 9)                                                                                  \
  X("layerNormBackward", do_layer_norm_backward, 10, 10)                                                               \
  X("softmax", do_softmax, 4, 4)                                                                                       \
  X("logSoftmax", do_log_softmax, 4, 4)                                                                                \
  X("argmaxRows", do_argmax_rows, 4, 4)                                                                                \
  X("gatherLogProbs", do_gather_log_probs, 6, 7)                                                                       \
  X("gatherLogProbsBackward", do_gather_log_probs_backward, 7, 7)                                                      \
  X("entropyBackward", do_entropy_backward, 7, 7)                                                                      \
  X("rope", do_rope, 8, 8)                                                                                             \
  X("swiglu", do_swiglu, 4, 4)                                                                                         \
  X("swigluBackward", do_swiglu_backward, 6, 6)                                                                        \
  X("gelu", do_gelu, 3, 3)                                                                                             \
  X("geluBackward", do_gelu_backward, 4, 4)                                                                            \
  X("attention", do_attention, 11, 12)                                                                                 \
  X("attentionBackward", do_attention_backward, 15, 16)                                                                \
  X("attentionDecode", do_attention_decode, 11, 12)                                                                    \
  X("adamw", do_adamw, 11, 11)                                                                                         \
  X("addBias", do_add_bias, 5, 5)                                                                                      \
  X("sumRows", do_sum_rows, 4, 4)                                                                                      \
  X("axpy", do_axpy, 4, 4)                                                                                             \
  X("mul", do_mul, 4, 4)                                                                                               \
  X("scale", do_scale, 3, 3)                                                                                           \
  X("roundBf16", do_round_bf16, 3, 3)                                                                                  \
  X("sumSquares", do_sum_squares, 2, 2)                                                                                \
  X("allFinite", do_all_finite, 2, 2)                                                                                  \
  X("copyRows", do_copy_rows, 8, 8)                                                                                    \
  X("embedding", do_embedding, 5, 5)                                                                                   \
  X("embeddingBackward", do_embedding_backward, 5, 5)

/* setReproducible(on, forceAvx2): every kernel from now on the fast one, or its reproducible twin (repro.h) — the AVX2
 * build of those with forceAvx2. Returns the instruction set of the reproducible build in use ("" when off). */
static napi_value js_set_reproducible(napi_env env, napi_callback_info info) {
  napi_value v[2];
  int on, avx2;
  if (hx_args(env, info, "setReproducible", 2, 2, v, NULL) || hx_bool(env, v[0], "setReproducible", "on", &on) ||
      hx_bool(env, v[1], "setReproducible", "forceAvx2", &avx2))
    return NULL;
  hx_repro = !on ? NULL : avx2 ? &hx_repro_avx2 : &hx_repro_wide;
  return hx_string(env, hx_repro ? hx_repro->isa : "");
}

static napi_value run(napi_env env, napi_callback_info info, const char *op, size_t min, size_t max,
                      void (*handler)(call_t *)) {
  call_t c = {env, op, {0}, 0, NULL};
  if (hx_args(env, info, op, min, max, c.argv, NULL)) return NULL;
  handler(&c);
  if (c.failed) return NULL;
  return c.result ? c.result : hx_undefined(env);
}

#define ENTRY(js, handler, min, max)                                                                                   \
  static napi_value js_##handler(napi_env env, napi_callback_info info) {                                              \
    return run(env, info, js, min, max, handler);                                                                      \
  }
KERNELS(ENTRY)

void hx_register_kernels(napi_env env, napi_value exports) {
#define EXPORT(js, handler, min, max) hx_export(env, exports, js, js_##handler);
  KERNELS(EXPORT)
  hx_export(env, exports, "setReproducible", js_set_reproducible);
}
