{
  "targets": [
    {
      "target_name": "hacrl_native",
      "sources": ["native/addon.c", "native/napi_util.c", "native/blas.c", "native/addon_blas.c", "native/kernels.c", "native/addon_kernels.c", "native/machine.c", "native/signals.c", "native/entropy.c", "native/bf16_skinny.c", "native/repro.c", "native/repro_avx2.c"],
      "cflags_c": ["-std=c11", "-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "cflags!": ["-O2", "-O0"],
      "ldflags": ["-fopenmp"],
      "libraries": ["-ldl", "-lm", "-lgomp"],
      "defines": ["NAPI_VERSION=8", "_GNU_SOURCE"]
    }
  ]
}
