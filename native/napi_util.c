/* The argument helpers of napi_util.h. */
#include "napi_util.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

napi_value hx_throw(napi_env env, const char *op, const char *fmt, ...) {
  char msg[512];
  int n = snprintf(msg, sizeof msg, "%s: ", op);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) napi_throw_error(env, NULL, msg);
  return NULL;
}

int hx_args(napi_env env, napi_callback_info info, const char *op, size_t min, size_t max, napi_value *argv,
            size_t *argc) {
  size_t n = max;
  if (napi_get_cb_info(env, info, &n, argv, NULL, NULL) != napi_ok) return hx_throw(env, op, "bad call"), -1;
  if (n < min) return hx_throw(env, op, "expected at least %zu arguments, got %zu", min, n), -1;
  for (size_t i = n; i < max; i++) napi_get_undefined(env, &argv[i]);
  if (argc) *argc = n;
  return 0;
}

static int typed(napi_env env, napi_value v, const char *op, const char *name, napi_typedarray_type want,
                 const char *wantName, void **ptr, size_t *len) {
  bool is = false;
  napi_is_typedarray(env, v, &is);
  if (!is) return hx_throw(env, op, "%s must be a %s", name, wantName), -1;
  napi_typedarray_type t;
  napi_value buf;
  size_t off;
  if (napi_get_typedarray_info(env, v, &t, len, ptr, &buf, &off) != napi_ok || t != want)
    return hx_throw(env, op, "%s must be a %s", name, wantName), -1;
  return 0;
}

int hx_f32(napi_env env, napi_value v, const char *op, const char *name, float **ptr, size_t *len) {
  return typed(env, v, op, name, napi_float32_array, "Float32Array", (void **)ptr, len);
}

int hx_u16(napi_env env, napi_value v, const char *op, const char *name, uint16_t **ptr, size_t *len) {
  return typed(env, v, op, name, napi_uint16_array, "Uint16Array (bfloat16 bits)", (void **)ptr, len);
}

int hx_is_u16(napi_env env, napi_value v) {
  bool is = false;
  napi_typedarray_type t;
  if (napi_is_typedarray(env, v, &is) != napi_ok || !is) return 0;
  return napi_get_typedarray_info(env, v, &t, NULL, NULL, NULL, NULL) == napi_ok && t == napi_uint16_array;
}

int hx_i32(napi_env env, napi_value v, const char *op, const char *name, int32_t **ptr, size_t *len) {
  return typed(env, v, op, name, napi_int32_array, "Int32Array", (void **)ptr, len);
}

int hx_i32_opt(napi_env env, napi_value v, const char *op, const char *name, int32_t **ptr, size_t *len) {
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t == napi_undefined || t == napi_null) {
    *ptr = NULL;
    *len = 0;
    return 0;
  }
  return hx_i32(env, v, op, name, ptr, len);
}

int hx_double(napi_env env, napi_value v, const char *op, const char *name, double *out) {
  if (napi_get_value_double(env, v, out) != napi_ok) return hx_throw(env, op, "%s must be a number", name), -1;
  return 0;
}

int hx_size(napi_env env, napi_value v, const char *op, const char *name, int64_t *out) {
  double d;
  if (hx_double(env, v, op, name, &d)) return -1;
  if (!(d >= 0) || d != floor(d) || d > 9.0e15)
    return hx_throw(env, op, "%s must be a non-negative integer, got %g", name, d), -1;
  *out = (int64_t)d;
  return 0;
}

int hx_bool(napi_env env, napi_value v, const char *op, const char *name, int *out) {
  bool b;
  if (napi_get_value_bool(env, v, &b) != napi_ok) return hx_throw(env, op, "%s must be a boolean", name), -1;
  *out = b;
  return 0;
}

int hx_need(napi_env env, const char *op, const char *name, size_t len, int64_t need) {
  if (need < 0 || (int64_t)len < need)
    return hx_throw(env, op, "%s has %zu elements but the shapes need %lld", name, len, (long long)need), -1;
  return 0;
}

int hx_export(napi_env env, napi_value exports, const char *name, napi_callback fn) {
  napi_value f;
  if (napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &f) != napi_ok) return -1;
  return napi_set_named_property(env, exports, name, f) == napi_ok ? 0 : -1;
}

napi_value hx_undefined(napi_env env) {
  napi_value v;
  napi_get_undefined(env, &v);
  return v;
}
napi_value hx_number(napi_env env, double x) {
  napi_value v;
  napi_create_double(env, x, &v);
  return v;
}
napi_value hx_boolean(napi_env env, int b) {
  napi_value v;
  napi_get_boolean(env, b != 0, &v);
  return v;
}
napi_value hx_string(napi_env env, const char *s) {
  napi_value v;
  napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
  return v;
}
