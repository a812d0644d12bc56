#include "webhook/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/xmalloc.h"
#include "kube/access.h"
#include "obs/httpserver.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "webhook/admission.h"
#include "webhook/sandbox_admission.h"

struct wh_server {
	struct obs_http_server *http;
	struct wh_sandbox_policy policy;
	struct kube_client *kc;
	struct informer *sandboxes;
	struct obs_metric *requests, *duration;
	struct obs_http_route routes[2];
};

static int may_use_owner(void *ctx, const cJSON *user_info, const char *ns, const char *owner, char *why,
			 size_t whylen)
{
	struct wh_server *s = ctx;
	struct kube_access_attrs a = {
		.ns = ns, .verb = "use", .group = "sandbox.dev", .resource = "workspaces", .name = owner,
	};
	int allowed = 0;
	struct kube_error err;
	enum kube_err e = kube_access_review(s->kc, user_info, &a, &allowed, why, whylen, &err);
	if (e != KUBE_OK) {
		snprintf(why, whylen, "SubjectAccessReview failed (%s): %s", kube_err_str(e), err.message);
		return -1;
	}
	return allowed;
}

static cJSON *by_digest(void *ctx, const char *digest)
{
	struct wh_server *s = ctx;
	return informer_list_by_index(s->sandboxes, digest);
}

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One review: decode, decide, encode. A request that is not an
 * AdmissionReview gets 400; the API server then applies the webhook's
 * failurePolicy (Fail for every Sandbox rule). */
static void serve(struct wh_server *s, const char *which, const struct obs_http_req *req,
		  struct obs_http_resp *resp,
		  void (*decide)(const struct wh_sandbox_policy *, const struct wh_review *, time_t, struct wh_verdict *))
{
	double t0 = mono_s();
	const char *labels[2] = { which, NULL };
	if (strcmp(req->method, "POST")) {
		resp->status = 405;
		resp->content_type = "text/plain";
		buf_appends(&resp->body, "POST an AdmissionReview\n");
		labels[1] = "bad-request";
		obs_metric_add(s->requests, labels, 1);
		return;
	}
	struct wh_review r;
	char err[256];
	if (wh_review_decode(req->body, req->body_len, &r, err, sizeof err) < 0) {
		resp->status = 400;
		resp->content_type = "text/plain";
		buf_appendf(&resp->body, "%s\n", err);
		labels[1] = "bad-request";
		obs_metric_add(s->requests, labels, 1);
		log_kv(LOG_WARN, "bad admission request", "webhook", which, "error", err);
		return;
	}
	struct wh_verdict v;
	decide(&s->policy, &r, time(NULL), &v);
	char *out = wh_response_encode(r.uid, &v);
	resp->status = 200;
	resp->content_type = "application/json";
	if (buf_appends(&resp->body, out) < 0)
		resp->status = 500;
	free(out);
	labels[1] = v.outcome;
	obs_metric_add(s->requests, labels, 1);
	obs_metric_observe(s->duration, labels, mono_s() - t0);
	if (!v.allowed)
		log_kv(LOG_INFO, "admission refused", "webhook", which, "namespace", r.ns, "name", r.name, "user",
		       r.username, "operation", r.operation, "message", v.message);
	wh_verdict_release(&v);
	wh_review_release(&r);
}

static void handle_mutate(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp)
{
	serve(ctx, "mutate-sandbox", req, resp, wh_sandbox_mutate);
}

static void handle_validate(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp)
{
	serve(ctx, "validate-sandbox", req, resp, wh_sandbox_validate);
}

struct wh_server *wh_server_start(const struct wh_server_opts *o, char *err, size_t errlen)
{
	static const double buckets[] = { .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10 };
	struct wh_server *s = xcalloc(1, sizeof *s);
	s->kc = o->kc;
	s->sandboxes = o->sandboxes;
	s->policy = (struct wh_sandbox_policy){
		.keys = o->keys,
		.keylens = o->keylens,
		.nkeys = o->nkeys,
		.owner_authz = o->cfg->owner_authz,
		.key_lifetime_s = o->cfg->key_lifetime_s,
		.may_use_owner = may_use_owner,
		.by_digest = by_digest,
		.ctx = s,
	};
	s->requests = obs_counter("sandbox_admission_requests_total",
				  "Admission reviews answered, by webhook and outcome (allowed, mutated, denied, "
				  "error, bad-request).",
				  "webhook,outcome");
	s->duration = obs_histogram("sandbox_admission_duration_seconds",
				    "Time to decide an admission review, by webhook and outcome.", "webhook,outcome",
				    buckets, sizeof buckets / sizeof buckets[0]);
	s->routes[0] = (struct obs_http_route){ "/mutate-sandbox", handle_mutate, s };
	s->routes[1] = (struct obs_http_route){ "/validate-sandbox", handle_validate, s };
	struct obs_http_opts ho = {
		.addr = o->addr,
		.tls_cert_file = o->cert_file,
		.tls_key_file = o->key_file,
		.threads = o->threads > 0 ? o->threads : 4,
		.max_connections = 32, /* x WH_REVIEW_MAX bounds the memory of requests in flight */
		.request_timeout_s = 10,
		.idle_timeout_s = 90,
		.max_body = WH_REVIEW_MAX,
		.max_headers = 16384,
		.routes = s->routes,
		.nroutes = 2,
		.name = "webhook",
	};
	s->http = obs_http_start(&ho, err, errlen);
	if (!s->http) {
		free(s);
		return NULL;
	}
	return s;
}

int wh_server_port(const struct wh_server *s)
{
	return obs_http_port(s->http);
}

void wh_server_free(struct wh_server *s)
{
	if (!s)
		return;
	obs_http_free(s->http);
	free(s);
}
