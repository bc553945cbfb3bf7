/* ringflow/log.h -- errors and diagnostics, the one convention of the library: calls
 * return 0 (or a count) or -errno and leave a one-line message (rf_last_error(), or
 * the object's own); warnings go to the log callback, silent by default. The library
 * never writes to stderr. More: common/README.md.
 */
#ifndef RINGFLOW_LOG_H
#define RINGFLOW_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

enum rf_log_level { RF_LOG_ERROR = 0, RF_LOG_WARN = 1, RF_LOG_INFO = 2 };

/* msg is one line without a newline; it is valid only during the call. The callback
 * may run on any thread (worker streams, CUDA callbacks): make it thread-safe. */
typedef void (*rf_log_fn)(enum rf_log_level level, const char *msg, void *user);

/* Install (fn non-NULL) or remove (NULL) the log callback. Set it before the library
 * starts threads; it is read atomically, but fn and user are two words. */
void rf_log_set(rf_log_fn fn, void *user);

/* The calling thread's message of its last failing library call ("" if none). */
const char *rf_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
