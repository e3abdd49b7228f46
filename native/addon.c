/* Module entry point: allocator settings, then each glue file registers its functions. */
#include "napi_util.h"
#include <malloc.h>

static napi_value init(napi_env env, napi_value exports) {
  /* Training allocates and frees the same large activation and gradient buffers every step. glibc returns blocks
   * above 128 KiB to the kernel at once, so every step took fresh zeroed pages, and on two threads the page faults
   * cost about a fifth of a step (measured by bench:model). Keeping blocks up to 32 MiB in the heap avoids that. */
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
  hx_register_blas(env, exports);
  hx_register_kernels(env, exports);
  hx_register_machine(env, exports);
  hx_register_signals(env, exports);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
