#include "kube/restmetrics.h"

#include <stdio.h>
#include <string.h>

#include "obs/metrics.h"

static struct {
	char host[256]; /* the API server's host[:port] */
	struct obs_metric *total, *seconds, *requests;
} rm;

void kube_rest_metrics_register(const char *server)
{
	const char *h = strstr(server, "://");
	h = h ? h + 3 : server;
	snprintf(rm.host, sizeof rm.host, "%.*s", (int)strcspn(h, "/"), h);
	static const double buckets[] = { .005, .025, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60 };
	rm.total = obs_counter("rest_client_requests_total",
			       "Number of HTTP requests, partitioned by status code, method, and host.",
			       "code,method,host");
	rm.seconds = obs_histogram("rest_client_request_duration_seconds",
				   "Request latency in seconds. Broken down by verb, and host.", "verb,host", buckets,
				   sizeof buckets / sizeof buckets[0]);
	rm.requests = obs_counter("sandbox_kube_requests_total", "Requests sent to the Kubernetes API.", NULL);
}

void kube_rest_metrics_observe(void *ctx, const char *method, long status, double seconds, int stream)
{
	char code[16];
	if (status)
		snprintf(code, sizeof code, "%ld", status);
	else
		snprintf(code, sizeof code, "<error>");
	const char *lv[] = { code, method, rm.host };
	obs_metric_add(rm.total, lv, 1);
	obs_metric_add(rm.requests, NULL, 1);
	if (!stream) { /* a watch's length says nothing about the server's latency */
		const char *verb[] = { method, rm.host };
		obs_metric_observe(rm.seconds, verb, seconds);
	}
}
