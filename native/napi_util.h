/* Small helpers shared by the N-API glue files: argument fetching with checks that throw JS errors instead of
 * crashing the process. Every getter returns 0 on success and leaves a pending JS exception on failure. */
#ifndef HACRL_NAPI_UTIL_H
#define HACRL_NAPI_UTIL_H
#define NAPI_VERSION 8
#include <node_api.h>
#include <stddef.h>
#include <stdint.h>

/* Throws "op: message" as a JS Error and returns NULL (the value an N-API callback returns after throwing). */
napi_value hx_throw(napi_env env, const char *op, const char *fmt, ...);

/* Fetches up to `max` arguments; fails when fewer than `min` were passed. */
int hx_args(napi_env env, napi_callback_info info, const char *op, size_t min, size_t max, napi_value *argv, size_t *argc);

/* A Float32Array argument: pointer and element count. `name` is used in error messages. */
int hx_f32(napi_env env, napi_value v, const char *op, const char *name, float **ptr, size_t *len);
/* A Uint16Array's data (bfloat16 bits), or throws naming the argument. */
int hx_u16(napi_env env, napi_value v, const char *op, const char *name, uint16_t **ptr, size_t *len);
/* Whether v is a Uint16Array (no throw). */
int hx_is_u16(napi_env env, napi_value v);
/* An Int32Array argument. */
int hx_i32(napi_env env, napi_value v, const char *op, const char *name, int32_t **ptr, size_t *len);
/* An optional Int32Array: undefined or null gives ptr = NULL, len = 0. */
int hx_i32_opt(napi_env env, napi_value v, const char *op, const char *name, int32_t **ptr, size_t *len);
/* A number that must be a non-negative integer. */
int hx_size(napi_env env, napi_value v, const char *op, const char *name, int64_t *out);
/* Any number. */
int hx_double(napi_env env, napi_value v, const char *op, const char *name, double *out);
/* A boolean. */
int hx_bool(napi_env env, napi_value v, const char *op, const char *name, int *out);
/* Fails with a message naming the op and the array when len < need. */
int hx_need(napi_env env, const char *op, const char *name, size_t len, int64_t need);

/* Registers a function on exports. */
int hx_export(napi_env env, napi_value exports, const char *name, napi_callback fn);

napi_value hx_undefined(napi_env env);
napi_value hx_number(napi_env env, double x);
napi_value hx_boolean(napi_env env, int b);
napi_value hx_string(napi_env env, const char *s);

/* Registration entry points of the glue files. */
void hx_register_blas(napi_env env, napi_value exports);
void hx_register_kernels(napi_env env, napi_value exports);
void hx_register_machine(napi_env env, napi_value exports);
void hx_register_signals(napi_env env, napi_value exports);
#endif
