/* Stop signals seen while JavaScript computes. Node runs a process.on('SIGINT') listener only when its event loop
 * turns, and a training step computes synchronously for minutes, so the listener alone would hear a Ctrl-C only after
 * the step. This handler runs at once, on whatever thread the kernel picks: the first SIGINT/SIGTERM writes its
 * notice to standard error, is counted for the loops to poll at their safe points (pendingStopSignal), and is passed
 * on to the handler installed before (libuv's, which queues it for the JavaScript listeners); the second writes its
 * notice and ends the process with the shell's status for the signal (128 + number). Only async-signal-safe calls
 * (write, _exit, lock-free atomics) run inside the handler. */
#include "napi_util.h"
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define NOTE_MAX 1024

static const int watched[2] = {SIGINT, SIGTERM};
static const char *const names[2] = {"SIGINT", "SIGTERM"};
static struct sigaction previous[2];
static int watching = 0;
static atomic_int count = 0;
static atomic_int first_signal = 0;
static char first_note[NOTE_MAX], again_note[NOTE_MAX];

static int slot_of(int sig) { return sig == SIGINT ? 0 : 1; }

static void put(const char *s) {
  size_t len = strlen(s);
  while (len > 0) {
    ssize_t n = write(STDERR_FILENO, s, len);
    if (n <= 0) return;
    s += n;
    len -= (size_t)n;
  }
}

static void on_stop_signal(int sig, siginfo_t *info, void *context) {
  int saved_errno = errno; /* the interrupted code may be reading errno */
  int slot = slot_of(sig);
  int seen = atomic_fetch_add(&count, 1);
  put("hacrl: ");
  put(names[slot]);
  if (seen >= 1) {
    put(again_note);
    _exit(128 + sig);
  }
  atomic_store(&first_signal, sig);
  put(first_note);
  const struct sigaction *p = &previous[slot];
  if (p->sa_flags & SA_SIGINFO) {
    if (p->sa_sigaction) p->sa_sigaction(sig, info, context);
  } else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
    p->sa_handler(sig);
  }
  errno = saved_errno;
}

static int copy_note(napi_env env, napi_value v, char *into, const char *name) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, into, NOTE_MAX, &len) != napi_ok) {
    hx_throw(env, "watchStopSignals", "%s must be a string", name);
    return -1;
  }
  return 0;
}

/* watchStopSignals(first, again): installs the handler (after the JavaScript listeners, whose handler it chains to);
 * `first` and `again` are the notices' text after "hacrl: SIGNAL". Resets the count. */
static napi_value js_watch(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  size_t argc = 2;
  if (hx_args(env, info, "watchStopSignals", 2, 2, argv, &argc)) return NULL;
  if (copy_note(env, argv[0], first_note, "first") || copy_note(env, argv[1], again_note, "again")) return NULL;
  atomic_store(&count, 0);
  atomic_store(&first_signal, 0);
  if (watching) return hx_undefined(env);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_stop_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 2; i++)
    if (sigaction(watched[i], &sa, &previous[i]) != 0)
      return hx_throw(env, "watchStopSignals", "sigaction(%s) failed", names[i]);
  watching = 1;
  return hx_undefined(env);
}

/* unwatchStopSignals(): puts the handlers found at watchStopSignals back. */
static napi_value js_unwatch(napi_env env, napi_callback_info info) {
  if (watching)
    for (int i = 0; i < 2; i++) sigaction(watched[i], &previous[i], NULL);
  watching = 0;
  return hx_undefined(env);
}

/* pendingStopSignal(): the number of the first stop signal since watchStopSignals, 0 while none came. */
static napi_value js_pending(napi_env env, napi_callback_info info) {
  return hx_number(env, atomic_load(&first_signal));
}

void hx_register_signals(napi_env env, napi_value exports) {
  hx_export(env, exports, "watchStopSignals", js_watch);
  hx_export(env, exports, "unwatchStopSignals", js_unwatch);
  hx_export(env, exports, "pendingStopSignal", js_pending);
}
