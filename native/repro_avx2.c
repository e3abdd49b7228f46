/* The reproducible kernels again with AVX-512 switched off, so one machine can show that the vector width changes
 * no bit (HACRL_FORCE_AVX2 selects this table; test/reproducible.test.ts compares). */
#pragma GCC target("no-avx512f")
#define HX_REPRO_ISA "AVX2 (forced)"
#define HX_REPRO_TABLE hx_repro_avx2
#include "repro_body.h"
