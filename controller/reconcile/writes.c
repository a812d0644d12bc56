/* The writes the parts of the controller share (writes.h). */
#define _GNU_SOURCE
#include "reconcile/writes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "base/jsonget.h"
#include "base/ktime.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "reconcile/ctlmetrics.h"
#include "reconcile/netkeep.h"
#include "reconcile/netverify.h"
#include "reconcile/state.h"
#include "reconcile/strset.h"
#include "reconcile/written.h"
#include "sandbox/podbuild.h"
#include "sandbox/podstate.h"
#include "sandbox/seal.h"

/* Seconds from the wall-clock second t to now. creationTimestamp has whole
 * seconds, so a latency measured from it reads up to a second long; the
 * benchmark measures from the client's clock instead. */
static double since(time_t t)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	double d = (double)(ts.tv_sec - t) + (double)ts.tv_nsec / 1e9;
	return d > 0 ? d : 0;
}

/* How long after our pod create its scope's claims read live unless the pod
 * cache shows the pod first: far longer than the cache lags while current. */
#define PODS_MADE_MS 30000

void sbx_rc_path(char *out, size_t n, const struct sbx_view *v)
{
	snprintf(out, n, "/apis/" SBX_API "/namespaces/%s/sandboxes/%s", v->ns, v->name);
}

void sbx_rc_path_status(char *out, size_t n, const struct sbx_view *v)
{
	snprintf(out, n, "/apis/" SBX_API "/namespaces/%s/sandboxes/%s/status", v->ns, v->name);
}

void sbx_rc_pod_path(char *out, size_t n, const char *ns, const char *name)
{
	snprintf(out, n, "/api/v1/namespaces/%s/pods/%s", ns, name);
}

void sbx_rc_event(struct sbx_controller *c, const struct sbx_view *v, const char *type, const char *reason,
		  const char *msg)
{
	if (c->events)
		event_record(c->events, SBX_API, "Sandbox", v->ns, v->name, v->uid, type, reason, msg);
}

static int cond_true(const cJSON *status, const char *type)
{
	const char *st = jstr(sbx_status_condition(status, type), "status");
	return st && !strcmp(st, "True");
}

/* The merge patch of v's status for in (caller frees), with v's
 * resourceVersion as a precondition when guarded; NULL when the cached
 * status says the same already. */
static char *status_patch(struct sbx_controller *c, const struct sbx_view *v, const struct sbx_status_in *in,
			  int guarded)
{
	char now[32];
	ktime_format_rfc3339(time(NULL), now);
	struct sbx_status_in with = *in;
	sbx_netverify_condition(c, v->status, &with);
	cJSON *st = sbx_status_build(&with, v->status, now);
	if (v->status && sbx_status_same(st, v->status)) {
		cJSON_Delete(st);
		return NULL;
	}
	cJSON *patch = cJSON_CreateObject();
	if (guarded)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(patch, "metadata"), "resourceVersion",
					meta_str(v->obj, "resourceVersion") ? meta_str(v->obj, "resourceVersion") : "");
	cJSON_AddItemToObject(patch, "status", st);
	char *body = cJSON_PrintUnformatted(patch);
	cJSON_Delete(patch);
	return body;
}

/* Writes the status when it differs from the cached one. Returns 1 when written,
 * 0 when unchanged, -1 on error (the caller retries). */
int sbx_rc_write_status(struct sbx_controller *c, const struct sbx_view *v, const struct sbx_status_in *in)
{
	char path[512], *body = status_patch(c, v, in, 0);
	if (!body)
		return 0;
	sbx_rc_path_status(path, sizeof path, v);
	struct kube_error err;
	fault_point("before-status-write");
	cJSON *resp = NULL;
	enum kube_err e = kube_request(c->kc, "PATCH", path, NULL, body, "application/merge-patch+json", &resp, &err);
	free(body);
	sbx_written_put(c->written, v->uid, meta_str(resp, "resourceVersion"));
	cJSON_Delete(resp);
	if (e == KUBE_ERR_NOT_FOUND)
		return 0; /* the Sandbox is gone; nothing to report to */
	if (e != KUBE_OK) {
		log_kv(LOG_WARN, "status write failed", "sandbox", v->name, "namespace", v->ns, "error",
		       err.message);
		return -1;
	}
	obs_metric_add(sbx_m.status_writes, NULL, 1);
	/* Creation -> Bound/Ready, observed on the write that makes it true. */
	if (in->bound && !cond_true(v->status, "Bound"))
		obs_metric_observe(sbx_m.to_bound, NULL, since(v->created));
	if (in->ready && !cond_true(v->status, "Ready"))
		obs_metric_observe(sbx_m.to_ready, NULL, since(v->created));
	fault_point("after-status-write");
	return 1;
}

int sbx_rc_write_status_guarded(struct sbx_controller *c, const struct sbx_view *v, const struct sbx_status_in *in)
{
	char path[512], *body = status_patch(c, v, in, 1);
	if (!body)
		return 0;
	sbx_rc_path_status(path, sizeof path, v);
	struct kube_error err;
	enum kube_err e = kube_request(c->kc, "PATCH", path, NULL, body, "application/merge-patch+json", NULL, &err);
	free(body);
	if (e == KUBE_OK)
		return 1;
	if (e == KUBE_ERR_NOT_FOUND)
		return 0;
	if (e == KUBE_ERR_CONFLICT)
		return REQUEUE_BUSY_MS;
	log_kv(LOG_WARN, "status write failed", "sandbox", v->name, "namespace", v->ns, "error", err.message);
	return -1;
}

static const char *old_bound_reason(const struct sbx_view *v)
{
	return jstr(sbx_status_condition(v->status, "Bound"), "reason");
}

/* Reports a Sandbox that gets no pod: Rejected (terminal) or Pending (will retry). */
int sbx_rc_report_unbound(struct sbx_controller *c, const struct sbx_view *v, const char *phase,
			  const char *reason, const char *msg, const char *event_reason)
{
	const char *old = old_bound_reason(v);
	int changed = !old || strcmp(old, reason);
	struct sbx_status_in in = {
		.phase = phase,
		.scope_digest = v->scope.digest[0] ? v->scope.digest : NULL,
		.fingerprint = v->scope.fingerprint[0] ? v->scope.fingerprint : NULL,
		.generation = v->generation,
		.bound = 0,
		.bound_reason = reason,
		.bound_message = msg,
		.ready = 0,
		.ready_reason = "NotBound",
		.ready_message = "the Sandbox is not bound to a pod",
	};
	int w = sbx_rc_write_status(c, v, &in);
	if (w < 0)
		return -1;
	if (changed && event_reason)
		sbx_rc_event(c, v, "Warning", event_reason, msg);
	return 0;
}

/* Fills phase and Ready from the bound pod (NULL pod = missing). */
static void pod_readiness(const cJSON *pod, struct sbx_status_in *in)
{
	if (!pod) {
		in->phase = "Failed";
		in->ready = 0;
		in->ready_reason = "PodMissing";
		in->ready_message = "the bound pod no longer exists; create a new Sandbox for a new sandbox";
		return;
	}
	const char *phase = jstr(jobj(pod, "status"), "phase");
	int ready = 0;
	const cJSON *cond;
	cJSON_ArrayForEach(cond, jobj(jobj(pod, "status"), "conditions"))
	{
		const char *ty = jstr(cond, "type"), *cs = jstr(cond, "status");
		if (ty && cs && !strcmp(ty, "Ready") && !strcmp(cs, "True"))
			ready = 1;
	}
	in->ready = 0;
	if (phase && !strcmp(phase, "Running")) {
		in->pod_ip = jstr(jobj(pod, "status"), "podIP");
		in->phase = "Running";
		in->ready = ready;
		in->ready_reason = ready ? "PodReady" : "PodPending";
		in->ready_message = ready ? "the pod is running and ready" : "the pod is running but not ready";
	} else if (phase && !strcmp(phase, "Succeeded")) {
		in->phase = "Succeeded";
		in->ready_reason = "PodSucceeded";
		in->ready_message = "the pod has completed";
	} else if (phase && !strcmp(phase, "Failed")) {
		in->phase = "Failed";
		in->ready_reason = "PodFailed";
		in->ready_message = "the pod has failed";
	} else {
		in->phase = "Pending";
		in->ready_reason = "PodPending";
		in->ready_message = "the pod is not running yet";
	}
	/* Why, when the pod's status says (a container waiting or exited and
	 * how, the scheduler's refusal): what the user needs to act on it. */
	if (!in->ready)
		sbx_pod_why(pod, SBX_CONTAINER, in->ready_detail, sizeof in->ready_detail);
}

/* The status of a Sandbox bound to pod_name (pod NULL: it is gone). */
struct sbx_status_in sbx_rc_bound_status(const struct sbx_view *v, const cJSON *pod, const char *pod_name,
					 const char *pod_uid, int how, const char *claimed, const char *expires,
					 const char *msg)
{
	static const char *const binding[] = { "Adopted", "Created", "Warm" };
	static const char *const reason[] = { "PodAdopted", "PodCreated", "PodWarm" };
	if (how < SBX_BIND_ADOPTED || how > SBX_BIND_WARM)
		how = SBX_BIND_ADOPTED;
	struct sbx_status_in in = {
		.pod_name = pod_name,
		.pod_uid = pod_uid,
		.scope_digest = v->scope.digest,
		.fingerprint = v->scope.fingerprint,
		.binding = binding[how],
		.claimed_at = claimed,
		.key_expires_at = expires,
		.generation = v->generation,
		.bound = 1,
		.bound_reason = reason[how],
		.bound_message = msg,
	};
	pod_readiness(pod, &in);
	return in;
}

int sbx_rc_binding_how(const char *binding)
{
	return binding && !strcmp(binding, "Created") ? SBX_BIND_CREATED
	       : binding && !strcmp(binding, "Warm")  ? SBX_BIND_WARM
						      : SBX_BIND_ADOPTED;
}

/* Writes the bound status for pod and, on the first binding, the event. */
int sbx_rc_report_bound(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, int how)
{
	/* The Sandbox whose warm bind made a warm pod the scope's (its
	 * controller owner) says so again when it re-creates it. */
	if (how == SBX_BIND_CREATED && !strncmp(meta_str(pod, "name") ? meta_str(pod, "name") : "", "sbx-w-", 6))
		how = SBX_BIND_WARM;
	const char *claimed = annotation(pod, SBX_ANN_CLAIMED_AT);
	time_t t = 0;
	char expires[32] = "";
	if (ktime_parse_rfc3339(claimed, &t) == 0)
		ktime_format_rfc3339(t + c->cfg->key_lifetime_s, expires);
	const char *pod_name = meta_str(pod, "name");
	char msg[256];
	static const char *const verb[] = { "adopted", "created", "bound warm" };
	static const char *const logged[] = { "pod adopted", "pod created", "warm pod bound" };
	static const char *const reason[] = { "PodAdopted", "PodCreated", "PodWarm" };
	snprintf(msg, sizeof msg, "%s pod %s", verb[how], pod_name);
	struct sbx_status_in in = sbx_rc_bound_status(v, pod, pod_name, meta_str(pod, "uid"), how, claimed,
						      expires[0] ? expires : NULL, msg);
	if (sbx_rc_write_status(c, v, &in) < 0)
		return -1;
	/* Announced once per Sandbox: a second reconcile on a cache that has not
	 * seen our status write yet must not count or report the binding again. */
	if (sbx_strset_add(c->announced, v->uid)) {
		if (how != SBX_BIND_WARM) /* warm binds: sandbox_warm_binds_total */
			obs_metric_add(how == SBX_BIND_CREATED ? sbx_m.pods_created : sbx_m.pods_adopted, NULL, 1);
		sbx_rc_event(c, v, "Normal", reason[how], msg);
		log_kv(LOG_INFO, logged[how], "sandbox", v->name, "namespace", v->ns,
		       "pod", pod_name, "scopeDigest", v->scope.digest, "binding", in.binding);
	}
	return 0;
}

/* Fetches the live pod; *pod NULL when it does not exist. */
int sbx_rc_get_pod(struct sbx_controller *c, const char *ns, const char *name, cJSON **pod)
{
	char path[512];
	struct kube_error err;
	sbx_rc_pod_path(path, sizeof path, ns, name);
	*pod = NULL;
	enum kube_err e = kube_request(c->kc, "GET", path, NULL, NULL, NULL, pod, &err);
	return e == KUBE_OK || e == KUBE_ERR_NOT_FOUND ? 0 : -1;
}

int sbx_rc_delete_pod(struct sbx_controller *c, const char *ns, const cJSON *pod)
{
	char path[600], body[256];
	sbx_rc_pod_path(path, sizeof path, ns, meta_str(pod, "name"));
	snprintf(body, sizeof body, "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\",\"preconditions\":{\"uid\":\"%s\"}}",
		 meta_str(pod, "uid") ? meta_str(pod, "uid") : "");
	struct kube_error err;
	enum kube_err e = kube_request(c->kc, "DELETE", path, NULL, body, NULL, NULL, &err);
	if (e == KUBE_OK || e == KUBE_ERR_NOT_FOUND || e == KUBE_ERR_CONFLICT)
		return 0;
	log_kv(LOG_WARN, "deleting a pod failed", "namespace", ns, "pod", meta_str(pod, "name"), "error", err.message);
	return -1;
}

void sbx_rc_log_create_failure(const char *ns, const char *sandbox, const char *pod_name, enum kube_err e,
			       const char *msg)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static int64_t next_ms;
	static unsigned long suppressed;
	int64_t now = ktime_mono_ms();
	pthread_mutex_lock(&mu);
	int go = now >= next_ms;
	unsigned long dropped = suppressed;
	if (go) {
		next_ms = now + 1000;
		suppressed = 0;
	} else {
		suppressed++;
	}
	pthread_mutex_unlock(&mu);
	if (!go)
		return;
	char n[24];
	snprintf(n, sizeof n, "%lu", dropped);
	log_kv(LOG_WARN, "creating pod failed", "sandbox", sandbox, "namespace", ns, "pod", pod_name, "error",
	       kube_err_str(e), "message", msg, "suppressedSinceLast", n);
}

cJSON *sbx_rc_build_pod(struct sbx_controller *c, const struct sbx_view *v, const char *pod_name, const char *claim,
			const char *claimed, const char *seal)
{
	struct sbx_pod_params p = {
		.ns = v->ns,
		.pod_name = pod_name,
		.sandbox_name = v->name,
		.sandbox_uid = v->uid,
		.spec = v->spec,
		.scope = &v->scope,
		.claimed_at = claimed,
		.seal = seal,
		.cfg = c->cfg,
		.claim = claim,
	};
	return sbx_pod_build(&p);
}

/* Creates the pod for generation name, or tells what stands in the way. A
 * resumed generation keeps its claim time (claimed_at); a new one is now. */
enum kube_err sbx_rc_create_pod(struct sbx_controller *c, const struct sbx_view *v, const char *pod_name,
				const char *claim, const char *claimed_at, cJSON **out, struct kube_error *err)
{
	char claimed[32], seal[65], path[512], sealed[600];
	if (claimed_at)
		snprintf(claimed, sizeof claimed, "%s", claimed_at);
	else
		ktime_format_rfc3339(time(NULL), claimed);
	sbx_seal_pod_name(pod_name, claim, sealed, sizeof sealed);
	if (sbx_seal_sign(c->seal_keys, v->ns, sealed, v->scope.digest, v->owner, v->scope.fingerprint,
			  claimed, seal) < 0) {
		kube_error_set(err, KUBE_ERR_OTHER, "%s", "cannot compute the pod seal");
		return KUBE_ERR_OTHER;
	}
	cJSON *pod = sbx_rc_build_pod(c, v, pod_name, claim, claimed, seal);
	if (!pod) { /* the spec was validated: the controller's config cannot serve it */
		kube_error_set(err, KUBE_ERR_OTHER, "%s",
			       "the controller cannot build a pod for this Sandbox; check its workspace config");
		return KUBE_ERR_OTHER;
	}
	/* Never a pod without its network floor (reconcile/netkeep.h), nor,
	 * with network.requireEnforced, where it is not enforced. */
	char why[512];
	if (sbx_netverify_gate(c, why, sizeof why) < 0) {
		cJSON_Delete(pod);
		kube_error_set(err, KUBE_ERR_OTHER, "%s", why);
		return KUBE_ERR_OTHER;
	}
	enum kube_err fe = sbx_netkeep_ensure(c, v->ns, err);
	if (fe == KUBE_OK)
		fe = sbx_netkeep_ensure_profiles(c, v->ns, v->spec, err);
	if (fe != KUBE_OK) {
		cJSON_Delete(pod);
		return fe;
	}
	char *body = cJSON_PrintUnformatted(pod);
	cJSON_Delete(pod);
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", v->ns);
	fault_point("before-pod-create");
	enum kube_err e = kube_request(c->kc, "POST", path, NULL, body, NULL, out, err);
	free(body);
	if (e == KUBE_OK) {
		sbx_written_put(c->created_pods, meta_str(*out, "uid"), meta_str(*out, "resourceVersion"));
		/* Until the pod cache shows it, claims of the digest read live
		 * (reconcile.c, cache_has_no_generation). */
		if (c->pods_made)
			sbx_strset_add_for(c->pods_made, v->scope.digest, PODS_MADE_MS);
	}
	fault_point("after-pod-create");
	return e;
}

long sbx_rc_key_lifetime(const struct sbx_controller *c)
{
	return c->cfg->key_lifetime_s;
}

/* Deletes path with preconditions uid (and resourceVersion when given).
 * Returns 0 (deleted or gone), REQUEUE_BUSY_MS (it changed meanwhile: look
 * again), or -1. */
int sbx_rc_delete(struct sbx_controller *c, const char *path, const char *uid, const char *rv)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "apiVersion", "v1");
	cJSON_AddStringToObject(o, "kind", "DeleteOptions");
	cJSON *pre = cJSON_AddObjectToObject(o, "preconditions");
	cJSON_AddStringToObject(pre, "uid", uid);
	if (rv)
		cJSON_AddStringToObject(pre, "resourceVersion", rv);
	char *body = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	struct kube_error err;
	enum kube_err e = kube_request(c->kc, "DELETE", path, NULL, body, NULL, NULL, &err);
	free(body);
	if (e == KUBE_OK || e == KUBE_ERR_NOT_FOUND)
		return 0;
	if (e == KUBE_ERR_CONFLICT)
		return REQUEUE_BUSY_MS;
	log_kv(LOG_WARN, "delete failed", "path", path, "error", err.message);
	return -1;
}

cJSON *sbx_rc_sandbox_ref(const char *name, const char *uid)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "apiVersion", SBX_API);
	cJSON_AddStringToObject(r, "kind", "Sandbox");
	cJSON_AddStringToObject(r, "name", name);
	cJSON_AddStringToObject(r, "uid", uid);
	return r;
}
