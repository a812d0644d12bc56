/* Clocks and timestamps: a monotonic clock for deadlines and backoff,
 * absolute deadlines for pthread condition waits, and RFC 3339 timestamps as
 * the Kubernetes API writes them. */
#ifndef SBX_BASE_KTIME_H
#define SBX_BASE_KTIME_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds on CLOCK_MONOTONIC (never jumps with wall-clock changes). */
int64_t ktime_mono_ms(void);
/* Initialises a condition variable that waits on CLOCK_MONOTONIC, so the
 * deadlines below are immune to wall-clock jumps. Aborts on failure. */
void ktime_cond_init(pthread_cond_t *cv);
/* Waits on cv (with mu held) until signalled or until the monotonic time
 * deadline_ms; returns 0 when signalled (or spuriously woken), ETIMEDOUT at the
 * deadline. A negative deadline waits without limit. */
int ktime_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms);
/* Sleeps ms milliseconds (restarting after signals). */
void ktime_sleep_ms(int64_t ms);
/* Parses an RFC 3339 timestamp ("2024-05-01T10:00:00Z", fractional seconds and
 * numeric offsets allowed). Returns 0 and sets *out (Unix seconds), or -1 and
 * leaves *out unchanged. */
int ktime_parse_rfc3339(const char *s, time_t *out);
/* Formats t as "YYYY-MM-DDTHH:MM:SSZ" into out (at least 21 bytes). */
void ktime_format_rfc3339(time_t t, char out[21]);

#endif
