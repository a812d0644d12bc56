#include "webhook/server.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "base/jsoncount.h"
#include "base/xmalloc.h"
#include "kube/access.h"
#include "kube/accesscache.h"
#include "obs/httpserver.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "sandbox/netprofile.h"
#include "sandbox/quota.h"
#include "base/jsonget.h"
#include "webhook/admission.h"
#include "webhook/pod_admission.h"
#include "webhook/sandbox_admission.h"

/* A log line of one kind at most once a second, with how many were left out. */
struct rate_log {
	int64_t next_ms;
	unsigned long dropped;
};

struct wh_server {
	struct obs_http_server *http;
	struct wh_sandbox_policy policy;
	struct kube_client *kc;
	struct informer *sandboxes, *pods, *quotas, *slots, *pool_pods, *profiles, *claims;
	const struct sbx_config *cfg;
	struct obs_metric *requests, *duration, *shed, *reviews;
	struct kube_accesscache *answers; /* SubjectAccessReview answers, briefly */
	struct obs_http_route routes[3];
	int authenticates; /* a client CA: every caller is the API server */

	pthread_mutex_t mu; /* guards what follows */
	size_t charged;	    /* of WH_PARSE_BUDGET */
	struct rate_log refused_log, bad_log;
};

/* Asks (through the cache) whether user_info may do a: 1 yes, 0 no, -1
 * could not be asked (why says why); counted by source and result. */
static int review_use(struct wh_server *s, const cJSON *user_info, struct kube_access_attrs *a, char *why,
		      size_t whylen)
{
	int allowed = 0;
	struct kube_error err;
	enum kube_access_source src;
	enum kube_err e = kube_access_review_cached(s->answers, s->kc, user_info, a, &allowed, why, whylen, &err, &src);
	static const char *const sources[] = { "cached", "shared", "asked" };
	const char *lv[] = { sources[src], e != KUBE_OK ? "error" : allowed ? "allowed"
									    : "denied" };
	obs_metric_add(s->reviews, lv, 1);
	if (e != KUBE_OK) {
		snprintf(why, whylen, "SubjectAccessReview failed (%s): %s", kube_err_str(e), err.message);
		return -1;
	}
	return allowed;
}

/* owner NULL asks about every owner of ns (no resource name): the policy
 * asks it first only when configured (admission.askEveryNameFirst). */
static int may_use_owner(void *ctx, const cJSON *user_info, const char *ns, const char *owner, char *why,
			 size_t whylen)
{
	struct kube_access_attrs a = {
		.ns = ns,
		.verb = "use",
		.group = "sandbox.dev",
		.resource = "workspaces",
		.name = owner,
	};
	return review_use(ctx, user_info, &a, why, whylen);
}

/* A profile is cluster-scoped: the review names no namespace (profile
 * NULL: every profile). */
static int may_use_profile(void *ctx, const cJSON *user_info, const char *profile, char *why, size_t whylen)
{
	struct kube_access_attrs a = {
		.verb = "use",
		.group = "sandbox.dev",
		.resource = SBX_PROFILE_PLURAL,
		.name = profile,
	};
	return review_use(ctx, user_info, &a, why, whylen);
}

/* Whether a profile exists, from the controller's cache of them. */
static int profile_exists(void *ctx, const char *profile)
{
	struct wh_server *s = ctx;
	if (!s->profiles || !informer_wait_synced(s->profiles, 0))
		return -1;
	cJSON *p = informer_get(s->profiles, NULL, profile);
	cJSON_Delete(p);
	return p != NULL;
}

/* The owner annotation of a sandbox pod, from the caches of sandbox pods
 * (scope pods and warm pods): every sbx- pod is the controller's (admission
 * reserves the names), so one neither cache holds is not known (-2), and
 * is never read live: an invented name costs the controller nothing. -1
 * while the caches have not synced. */
static int pod_owner(void *ctx, const char *ns, const char *name, char *owner, size_t ownerlen)
{
	struct wh_server *s = ctx;
	if (!s->pods || !informer_wait_synced(s->pods, 0) || (s->pool_pods && !informer_wait_synced(s->pool_pods, 0)))
		return -1;
	cJSON *pod = informer_get(s->pods, ns, name);
	if (!pod && s->pool_pods)
		pod = informer_get(s->pool_pods, ns, name);
	if (!pod)
		return -2;
	const char *o = annotation(pod, "sandbox.dev/workspace-owner");
	snprintf(owner, ownerlen, "%s", o ? o : "");
	cJSON_Delete(pod);
	return 1;
}

static cJSON *by_digest(void *ctx, const char *digest)
{
	struct wh_server *s = ctx;
	return informer_list_by_index(s->sandboxes, digest);
}

/* The cached claim records of a scope digest (NULL: no record cache, or
 * not synced yet: the controller's claim decides). */
static cJSON *records_by_digest(void *ctx, const char *digest)
{
	struct wh_server *s = ctx;
	if (!s->claims || !informer_wait_synced(s->claims, 0))
		return NULL;
	return informer_list_by_index(s->claims, digest);
}

/* The early quota answer from the controller's caches (sandbox/quota.h). */
static int quota_refuses(void *ctx, const char *ns, const char *owner, const char *digest, char *msg, size_t msglen)
{
	struct wh_server *s = ctx;
	char key[33];
	if (!s->quotas || !s->slots || !informer_wait_synced(s->quotas, 0) || !informer_wait_synced(s->slots, 0) ||
	    sbx_quota_owner_key(ns, owner, key) < 0)
		return 0;
	cJSON *quotas = informer_list_by_index(s->quotas, ns), *slots = informer_list_by_index(s->slots, key);
	int r = sbx_quota_refuses(quotas, slots, ns, owner, digest, s->cfg, msg, msglen);
	cJSON_Delete(quotas);
	cJSON_Delete(slots);
	return r;
}

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Takes cost from the parse budget; 0 when it does not fit now. */
static int budget_take(struct wh_server *s, size_t cost)
{
	pthread_mutex_lock(&s->mu);
	int ok = cost <= WH_PARSE_BUDGET - s->charged;
	if (ok)
		s->charged += cost;
	pthread_mutex_unlock(&s->mu);
	return ok;
}

static void budget_give(struct wh_server *s, size_t cost)
{
	pthread_mutex_lock(&s->mu);
	s->charged -= cost;
	pthread_mutex_unlock(&s->mu);
}

/* Whether a line of this kind may be logged now; *dropped gets how many were
 * left out since the last one. */
static int rate_log_ok(struct wh_server *s, struct rate_log *rl, unsigned long *dropped)
{
	int64_t now = (int64_t)(mono_s() * 1000);
	pthread_mutex_lock(&s->mu);
	int ok = now >= rl->next_ms;
	if (ok) {
		rl->next_ms = now + 1000;
		*dropped = rl->dropped;
		rl->dropped = 0;
	} else {
		rl->dropped++;
	}
	pthread_mutex_unlock(&s->mu);
	return ok;
}

/* A user-supplied value for a log line: at most WH_LOG_FIELD_MAX bytes (cut
 * ones end in "..."), "" for NULL. */
static const char *capped(const char *v, char out[WH_LOG_FIELD_MAX + 4])
{
	if (!v)
		return "";
	size_t n = strlen(v);
	if (n <= WH_LOG_FIELD_MAX)
		return v;
	memcpy(out, v, WH_LOG_FIELD_MAX);
	memcpy(out + WH_LOG_FIELD_MAX, "...", 4);
	return out;
}

/* Answers a body refused before it was parsed: 413 (it can never be a
 * Sandbox review) or 429 (the budget is spent now; the API server's caller
 * may retry). */
static void refuse_unparsed(struct wh_server *s, const char *which, const struct obs_http_req *req,
			    struct obs_http_resp *resp, int status, const char *why)
{
	const char *labels[2] = { which, status == 429 ? "shed" : "bad-request" };
	resp->status = status;
	resp->content_type = "text/plain";
	if (status == 429)
		resp->retry_after_s = 1;
	buf_appendf(&resp->body, "%s\n", why);
	obs_metric_add(s->requests, labels, 1);
	unsigned long dropped;
	if (rate_log_ok(s, &s->bad_log, &dropped)) {
		char n[24];
		snprintf(n, sizeof n, "%lu", dropped);
		log_kv(LOG_WARN, "admission request refused unread", "webhook", which, "peer", req->peer, "error",
		       why, "suppressedSinceLast", n);
	}
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
	/* Bounded before anything is parsed: values per byte decide what a
	 * parse costs, and the budget is shared by every loop. */
	size_t values = json_count_values(req->body, req->body_len);
	if (values > WH_REVIEW_MAX_NODES) {
		refuse_unparsed(s, which, req, resp, 413, "AdmissionReview holds more JSON values than a Sandbox review can");
		return;
	}
	size_t cost = 2 * req->body_len + values * WH_NODE_COST;
	if (!budget_take(s, cost)) {
		const char *why[2] = { which, "parse-budget" };
		obs_metric_add(s->shed, why, 1);
		refuse_unparsed(s, which, req, resp, 429, "the admission webhook is busy; retry");
		return;
	}
	struct wh_review r;
	char err[256];
	if (wh_review_decode(req->body, req->body_len, &r, err, sizeof err) < 0) {
		budget_give(s, cost);
		refuse_unparsed(s, which, req, resp, 400, err);
		return;
	}
	r.authenticated = s->authenticates && req->client_name;
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
	unsigned long dropped;
	if (!v.allowed && rate_log_ok(s, &s->refused_log, &dropped)) {
		char a[WH_LOG_FIELD_MAX + 4], b[WH_LOG_FIELD_MAX + 4], c[WH_LOG_FIELD_MAX + 4], d[WH_LOG_FIELD_MAX + 4],
		    e[WH_LOG_FIELD_MAX + 4], msg[512 + 4], n[24];
		snprintf(msg, sizeof msg, "%.512s%s", v.message, strlen(v.message) > 512 ? "..." : "");
		snprintf(n, sizeof n, "%lu", dropped);
		log_kv(LOG_INFO, "admission refused", "webhook", which, "namespace", capped(r.ns, a), "name",
		       capped(r.name, b), "user", capped(r.username, c), "operation", capped(r.operation, d),
		       "peer", capped(req->client_name ? req->client_name : req->peer, e), "message", msg,
		       "suppressedSinceLast", n);
	}
	wh_verdict_release(&v);
	wh_review_release(&r);
	budget_give(s, cost);
}

static void handle_mutate(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp)
{
	serve(ctx, "mutate-sandbox", req, resp, wh_sandbox_mutate);
}

static void handle_validate(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp)
{
	serve(ctx, "validate-sandbox", req, resp, wh_sandbox_validate);
}

static void handle_pod_connect(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp)
{
	serve(ctx, "validate-pod-connect", req, resp, wh_pod_connect);
}

struct wh_server *wh_server_start(const struct wh_server_opts *o, char *err, size_t errlen)
{
	static const double buckets[] = { .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10 };
	struct wh_server *s = xcalloc(1, sizeof *s);
	pthread_mutex_init(&s->mu, NULL);
	s->authenticates = o->client_ca_file != NULL;
	s->kc = o->kc;
	s->sandboxes = o->sandboxes;
	s->pods = o->pods;
	s->quotas = o->quotas;
	s->slots = o->slots;
	s->cfg = o->cfg;
	s->pool_pods = o->pool_pods;
	s->profiles = o->profiles;
	s->claims = o->claims;
	s->policy = (struct wh_sandbox_policy){
		.keys = o->keys,
		.keylens = o->keylens,
		.nkeys = o->nkeys,
		.owner_authz = o->cfg->owner_authz,
		.key_lifetime_s = o->cfg->key_lifetime_s,
		.may_use_owner = may_use_owner,
		.may_use_profile = may_use_profile,
		.profile_exists = profile_exists,
		.by_digest = by_digest,
		.pod_owner = pod_owner,
		.quota_refuses = quota_refuses,
		.ctx = s,
		.records_by_digest = records_by_digest,
		.ask_every_name_first = o->cfg->ask_every_name_first,
	};
	s->requests = obs_counter("sandbox_admission_requests_total",
				  "Admission reviews answered, by webhook and outcome (allowed, mutated, denied, "
				  "error, bad-request).",
				  "webhook,outcome");
	s->duration = obs_histogram("sandbox_admission_duration_seconds",
				    "Time to decide an admission review, by webhook and outcome.", "webhook,outcome",
				    buckets, sizeof buckets / sizeof buckets[0]);
	s->reviews = obs_counter("sandbox_admission_access_reviews_total",
				 "Owner authorizations the webhook needed, by source (cached: an answer of the last "
				 "seconds; shared: another request's review of the same question; asked: a "
				 "SubjectAccessReview) and result (allowed, denied, error).",
				 "source,result");
	s->answers = kube_accesscache_new(o->review_allow_ms, o->review_deny_ms, 0);
	s->shed = obs_counter("sandbox_admission_shed_total",
			      "Admission reviews answered 429 because the parse budget was spent, by webhook.",
			      "webhook,reason");
	s->routes[0] = (struct obs_http_route){ "/mutate-sandbox", handle_mutate, s };
	s->routes[1] = (struct obs_http_route){ "/validate-sandbox", handle_validate, s };
	s->routes[2] = (struct obs_http_route){ "/validate-pod-connect", handle_pod_connect, s };
	struct obs_http_opts ho = {
		.addr = o->addr,
		.tls_cert_file = o->cert_file,
		.tls_key_file = o->key_file,
		/* One loop reads and answers every connection (the whole cap is
		 * its own, never split unevenly across loops by the port's hash);
		 * the decisions, which wait on SubjectAccessReviews, run on handler
		 * threads and hold no loop. */
		.threads = o->threads > 0 ? o->threads : 1,
		.handler_threads = o->handler_threads > 0 ? o->handler_threads : WH_HANDLER_THREADS,
		.tls_client_ca_file = o->client_ca_file,
		.tls_client_names = o->client_names,
		/* The API server keeps up to 25 idle connections to a webhook host
		 * (client-go's transport) and opens more in a burst; its idle ones
		 * close after 90 s, so ours wait longer: it closes first. At the
		 * cap, a connection it has just reused or opened is not cut for a
		 * queued one (Go resends a POST only when nothing was written). */
		.max_connections = 128,
		.request_timeout_s = 10,
		.idle_timeout_s = 120,
		.shed_min_age_ms = 1000,
		.max_body = WH_REVIEW_MAX,
		.max_inflight_bytes = WH_INFLIGHT_MAX,
		.max_headers = 16384,
		.routes = s->routes,
		.nroutes = 3,
		.name = "webhook",
	};
	fault_delay("webhook-start"); /* tests: a listener that binds late */
	s->http = obs_http_start(&ho, err, errlen);
	if (!s->http) {
		kube_accesscache_free(s->answers);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return NULL;
	}
	return s;
}

int wh_server_port(const struct wh_server *s)
{
	return obs_http_port(s->http);
}

void wh_server_drain(struct wh_server *s)
{
	obs_http_drain(s->http);
}

void wh_server_free(struct wh_server *s)
{
	if (!s)
		return;
	obs_http_free(s->http);
	kube_accesscache_free(s->answers);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
