/* The reproducible kernels compiled for this machine's widest vectors (-march=native), and the mode's switch. */
#include "repro.h"

#if defined(__AVX512F__)
#define HX_REPRO_ISA "AVX-512"
#elif defined(__AVX2__)
#define HX_REPRO_ISA "AVX2"
#else
#define HX_REPRO_ISA "SSE2"
#endif
#define HX_REPRO_TABLE hx_repro_wide
#include "repro_body.h"

const hx_repro_kernels *hx_repro = NULL;
