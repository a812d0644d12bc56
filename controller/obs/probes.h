/* The handlers of the probe and metrics listeners (controller-runtime's
 * paths): GET /healthz, /readyz and /metrics. The process decides what ready
 * means and what a scrape refreshes first; these only answer. */
#ifndef SBX_OBS_PROBES_H
#define SBX_OBS_PROBES_H

#include <stdatomic.h>

#include "obs/httpserver.h"

/* /readyz: ready(arg) says whether the process is ready; once
 * obs_readiness_stop was called it is not, whatever ready says. Zeroed (or
 * set field by field), it is not stopping. */
struct obs_readiness {
	int (*ready)(void *arg);
	void *arg;
	atomic_int stopping;
};

/* The process is shutting down: /readyz answers 503 from now on, so the
 * endpoints drop this replica while its listeners still serve (the shutdown
 * drain). Thread-safe; it cannot be undone. */
void obs_readiness_stop(struct obs_readiness *r);

/* /metrics: refresh(arg) (NULL: none) updates gauges that are read at
 * scrape time before the registry is rendered. */
struct obs_scrape {
	void (*refresh)(void *arg);
	void *arg;
};

/* GET /healthz: the process serves ("ok"). ctx unused. */
void obs_serve_healthz(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp);
/* GET /readyz: "ok", or 503 "shutting down" (obs_readiness_stop) or "not
 * ready" (ready said no; ctx: struct obs_readiness). */
void obs_serve_readyz(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp);
/* GET /metrics: the registry in the Prometheus text format (ctx: struct
 * obs_scrape, NULL ok). */
void obs_serve_metrics(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp);

#endif
