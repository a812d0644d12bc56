/* Unit tests for obs/metrics: exposition format, escaping, histograms, the
 * series cap, idempotent registration and concurrent updates. Each test uses
 * family names of its own: the registry is process-wide. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/buf.h"
#include "obs/metrics.h"
#include "test_suites.h"

/* Renders the registry into a fresh buffer (caller releases). */
static void render(struct buf *b)
{
	buf_init(b, 4 << 20);
	obs_metrics_render(b);
}

static void test_counter_format(void)
{
	struct obs_metric *m = obs_counter("t_requests_total", "Requests.\\ line\nnext", "code,method");
	const char *v1[] = { "200", "GET" }, *v2[] = { "404", "PUT" };
	obs_metric_add(m, v1, 1);
	obs_metric_add(m, v1, 2);
	obs_metric_add(m, v2, 0.5);
	struct buf b;
	render(&b);
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "# HELP t_requests_total Requests.\\\\ line\\nnext\n"
					      "# TYPE t_requests_total counter\n"
					      "t_requests_total{code=\"200\",method=\"GET\"} 3\n"
					      "t_requests_total{code=\"404\",method=\"PUT\"} 0.5\n"));
	CU_ASSERT_EQUAL(obs_metric_value(m, v1), 3);
	buf_release(&b);
}

static void test_label_escaping(void)
{
	struct obs_metric *m = obs_gauge("t_escape", "E.", "v");
	const char *v[] = { "a\"b\\c\nd" };
	obs_metric_set(m, v, 7);
	obs_metric_set(m, v, 4);
	struct buf b;
	render(&b);
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "t_escape{v=\"a\\\"b\\\\c\\nd\"} 4\n"));
	buf_release(&b);
}

static void test_unlabelled_and_idempotent(void)
{
	struct obs_metric *a = obs_gauge("t_plain", "P.", NULL);
	struct obs_metric *b2 = obs_gauge("t_plain", "other help", NULL);
	CU_ASSERT_PTR_EQUAL(a, b2);
	obs_metric_add(a, NULL, 2);
	obs_metric_add(b2, NULL, -0.25);
	struct buf b;
	render(&b);
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "# HELP t_plain P.\n# TYPE t_plain gauge\nt_plain 1.75\n"));
	buf_release(&b);
	obs_metric_add(NULL, NULL, 1); /* a NULL family is a no-op */
	obs_counter("t_untouched_total", "U.", NULL);
	render(&b);
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\nt_untouched_total 0\n")); /* plain metrics start at 0 */
	buf_release(&b);
}

static void test_histogram(void)
{
	const double bk[] = { 0.1, 1 };
	struct obs_metric *h = obs_histogram("t_latency_seconds", "L.", "verb", bk, 2);
	const char *v[] = { "GET" };
	obs_metric_observe(h, v, 0.05);
	obs_metric_observe(h, v, 0.1); /* le is inclusive */
	obs_metric_observe(h, v, 0.5);
	obs_metric_observe(h, v, 3);
	struct buf b;
	render(&b);
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "# TYPE t_latency_seconds histogram\n"
					      "t_latency_seconds_bucket{verb=\"GET\",le=\"0.1\"} 2\n"
					      "t_latency_seconds_bucket{verb=\"GET\",le=\"1\"} 3\n"
					      "t_latency_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 4\n"
					      "t_latency_seconds_sum{verb=\"GET\"} 3.65\n"
					      "t_latency_seconds_count{verb=\"GET\"} 4\n"));
	buf_release(&b);
	struct obs_metric *d = obs_histogram("t_default_seconds", "D.", NULL, NULL, 0);
	obs_metric_observe(d, NULL, 20);
	render(&b);
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "t_default_seconds_bucket{le=\"0.005\"} 0\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "t_default_seconds_bucket{le=\"10\"} 0\n"
					      "t_default_seconds_bucket{le=\"+Inf\"} 1\n"));
	buf_release(&b);
}

static void test_cardinality_cap(void)
{
	struct obs_metric *m = obs_counter("t_capped_total", "C.", "id");
	char id[32];
	const char *v[] = { id };
	for (int i = 0; i < OBS_METRICS_MAX_SERIES + 5; i++) {
		snprintf(id, sizeof id, "x%d", i);
		obs_metric_add(m, v, 1);
	}
	snprintf(id, sizeof id, "x0");
	obs_metric_add(m, v, 1); /* an existing series still counts */
	CU_ASSERT_EQUAL(obs_metric_value(m, v), 2);
	snprintf(id, sizeof id, "x%d", OBS_METRICS_MAX_SERIES);
	CU_ASSERT_EQUAL(obs_metric_value(m, v), 0);
	struct buf b;
	render(&b);
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "obs_metrics_dropped_series_total{family=\"t_capped_total\"} 5\n"));
	CU_ASSERT_PTR_NULL(strstr(b.data, "t_capped_total{id=\"x1000\"}"));
	buf_release(&b);
}

static void *hammer(void *arg)
{
	struct obs_metric *m = arg;
	const char *v[] = { "k" };
	for (int i = 0; i < 20000; i++)
		obs_metric_add(m, v, 1);
	return NULL;
}

static void test_threads(void)
{
	struct obs_metric *m = obs_counter("t_threads_total", "T.", "k");
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, hammer, m), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	const char *v[] = { "k" };
	CU_ASSERT_EQUAL(obs_metric_value(m, v), 80000);
}

static void test_process_families(void)
{
	struct buf b;
	render(&b);
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "# TYPE process_resident_memory_bytes gauge\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\nprocess_cpu_seconds_total "));
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\nprocess_start_time_seconds "));
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\nprocess_open_fds "));
	CU_ASSERT_PTR_NOT_NULL(strstr(b.data, "\nprocess_max_fds "));
	buf_release(&b);
}

void register_obs_tests(void)
{
	SBX_SUITE("obs/metrics", { "counter format", test_counter_format }, { "label escaping", test_label_escaping },
		  { "unlabelled, idempotent", test_unlabelled_and_idempotent }, { "histogram", test_histogram },
		  { "cardinality cap", test_cardinality_cap }, { "threads", test_threads },
		  { "process families", test_process_families });
}
