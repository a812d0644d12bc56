/* A process-wide metrics registry rendered in the Prometheus text format
 * (version 0.0.4): counters, gauges and histograms, each a family with fixed
 * label names and one series per label-value set.
 *
 * Registration is idempotent by name: registering a name again returns the
 * family already registered (its type, labels and buckets are those of the
 * first registration). Families live until the process ends; the returned
 * pointers are borrowed and never freed by callers. Every call is
 * thread-safe. The number of series per family is capped
 * (OBS_METRICS_MAX_SERIES): an update that would create one more series is
 * dropped and counted in obs_metrics_dropped_series_total{family}. A family
 * without labels has its one series from the start, at 0. */
#ifndef SBX_OBS_METRICS_H
#define SBX_OBS_METRICS_H

#include <stddef.h>

#include "base/buf.h"

#define OBS_METRICS_MAX_SERIES 1000 /* label-value sets per family */
#define OBS_METRICS_MAX_LABELS 8    /* label names per family */
#define OBS_METRICS_MAX_BUCKETS 32  /* histogram buckets (without +Inf) */

struct obs_metric;

/* Register (or find) a family: returns it, borrowed (it lives until the
 * process ends; never freed). labels is "a,b" or NULL for none. On a name
 * that is already registered with another type, label set or an invalid
 * definition (too many labels or buckets), the program aborts with a message:
 * that is a programming error, never an input error. */
struct obs_metric *obs_counter(const char *name, const char *help, const char *labels /* "a,b" or NULL */);
struct obs_metric *obs_gauge(const char *name, const char *help, const char *labels);
/* buckets: upper bounds, strictly increasing, without +Inf; nbuckets 0 takes
 * Prometheus's defaults (.005 ... 10 seconds). */
struct obs_metric *obs_histogram(const char *name, const char *help, const char *labels,
				 const double *buckets, size_t nbuckets /* 0 = defaults */);

/* label_values: one value per label name, in order (NULL for a family with
 * no labels); the values are copied. m may be NULL (then nothing happens), so
 * code that runs without a registry (unit tests) needs no special case. */
void obs_metric_add(struct obs_metric *m, const char *const *label_values, double v);	  /* counter/gauge */
void obs_metric_set(struct obs_metric *m, const char *const *label_values, double v);	  /* gauge */
void obs_metric_observe(struct obs_metric *m, const char *const *label_values, double v); /* histogram */

/* Appends every family, in registration order, followed by the process
 * families (process_resident_memory_bytes, process_open_fds, process_max_fds,
 * process_start_time_seconds, process_cpu_seconds_total, read from /proc at
 * the time of the call). Stops quietly where out's cap is reached. */
void obs_metrics_render(struct buf *out);

/* The current value of a counter or gauge series (0 when it does not exist),
 * or a histogram series' count. For tests and benchmarks. */
double obs_metric_value(struct obs_metric *m, const char *const *label_values);

#endif
