#include "obs/probes.h"

#include "obs/metrics.h"

void obs_serve_healthz(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp)
{
	buf_appends(&resp->body, "ok\n");
}

void obs_readiness_stop(struct obs_readiness *r)
{
	atomic_store(&r->stopping, 1);
}

void obs_serve_readyz(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp)
{
	struct obs_readiness *r = ctx;
	if (atomic_load(&r->stopping)) {
		resp->status = 503;
		buf_appends(&resp->body, "shutting down\n");
	} else if (r->ready(r->arg)) {
		buf_appends(&resp->body, "ok\n");
	} else {
		resp->status = 503;
		buf_appends(&resp->body, "not ready\n");
	}
}

void obs_serve_metrics(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp)
{
	const struct obs_scrape *s = ctx;
	resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
	if (s && s->refresh)
		s->refresh(s->arg);
	obs_metrics_render(&resp->body);
}
