/* The decision for one Sandbox: claim, adopt, follow its pod, and the
 * generations of a key (reconcile.h). The wiring that feeds it - informers,
 * queue, workers - is controller.c. */
#define _GNU_SOURCE
#include "reconcile/reconcile.h"
#include "reconcile/reconcile_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/jsonget.h"
#include "base/xmalloc.h"
#include "base/ktime.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "sandbox/authz.h"
#include "sandbox/claimrec.h"
#include "reconcile/ctlmetrics.h"
#include "reconcile/inforce.h"
#include "sandbox/podbuild.h"
#include "sandbox/scope.h"
#include "sandbox/seal.h"
#include "sandbox/spec.h"
#include "sandbox/status.h"
#include "reconcile/strset.h"
#include "sandbox/trim.h"
#include "sandbox/verify.h"
#include "reconcile/warm.h"
#include "reconcile/written.h"

#define LABEL_DIGEST "sandbox.dev/scope-digest"
#define ANN_CLAIMED_AT SBX_ANN_CLAIMED_AT_KEY
/* A bound to the -<n> names tried in one reconcile; far beyond any real
 * key reuse, it only stops a pathological namespace from spinning. */
#define MAX_GENERATIONS 10000

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
/* ---- one reconcile ---- */

void sbx_rc_path_status(char *out, size_t n, const struct sbx_view *v)
{
	snprintf(out, n, "/apis/" SBX_API "/namespaces/%s/sandboxes/%s/status", v->ns, v->name);
}

static void path_pod(char *out, size_t n, const char *ns, const char *name)
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

/* Writes the status when it differs from the cached one. Returns 1 when written,
 * 0 when unchanged, -1 on error (the caller retries). */
int sbx_rc_write_status(struct sbx_controller *c, const struct sbx_view *v, const struct sbx_status_in *in)
{
	char now[32], path[512];
	ktime_format_rfc3339(time(NULL), now);
	cJSON *st = sbx_status_build(in, v->status, now);
	if (v->status && sbx_status_same(st, v->status)) {
		cJSON_Delete(st);
		return 0;
	}
	cJSON *patch = cJSON_CreateObject();
	cJSON_AddItemToObject(patch, "status", st);
	char *body = cJSON_PrintUnformatted(patch);
	cJSON_Delete(patch);
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
}

static int owned_by(const cJSON *pod, const char *uid, int *is_controller)
{
	const cJSON *ref;
	cJSON_ArrayForEach(ref, jobj(jobj(pod, "metadata"), "ownerReferences"))
	{
		const char *u = jstr(ref, "uid");
		if (u && !strcmp(u, uid)) {
			if (is_controller)
				*is_controller = cJSON_IsTrue(jobj(ref, "controller"));
			return 1;
		}
	}
	return 0;
}

static const char *controller_owner_name(const cJSON *pod)
{
	const cJSON *ref;
	cJSON_ArrayForEach(ref, jobj(jobj(pod, "metadata"), "ownerReferences"))
	{
		if (cJSON_IsTrue(jobj(ref, "controller")))
			return jstr(ref, "name");
	}
	return NULL;
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
	const char *claimed = annotation(pod, ANN_CLAIMED_AT);
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
	path_pod(path, sizeof path, ns, name);
	*pod = NULL;
	enum kube_err e = kube_request(c->kc, "GET", path, NULL, NULL, NULL, pod, &err);
	return e == KUBE_OK || e == KUBE_ERR_NOT_FOUND ? 0 : -1;
}

/* 1 when the bound pod was changed out of band (contract section 5): its
 * sealed identity no longer verifies, or an image or container changed
 * (sbx_pod_tamper_check); the reason goes to why. A terminating pod is not
 * tampered. */
static int pod_tampered(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, char *why,
			size_t whylen)
{
	struct sbx_verify_expect ex = {
		.ns = v->ns, .owner = v->owner, .scope = &v->scope, .keys = c->seal_keys, .check_fingerprint = 1
	};
	enum sbx_verify vr = sbx_pod_verify(pod, &ex);
	if (vr == SBX_VERIFY_TERMINATING)
		return 0;
	if (vr != SBX_VERIFY_OK) {
		snprintf(why, whylen, "%s", sbx_verify_str(vr));
		return 1;
	}
	cJSON *want = sbx_rc_build_pod(c, v, meta_str(pod, "name"), annotation(pod, SBX_ANN_CLAIM),
				       annotation(pod, ANN_CLAIMED_AT), annotation(pod, SBX_ANN_SEAL));
	struct sbx_certify cert = { .expected = want, .spec = v->spec, .cfg = c->cfg };
	int t = want && sbx_pod_tamper_check(pod, &cert, why, whylen) != SBX_VERIFY_OK;
	cJSON_Delete(want);
	return t;
}

/* A bound Sandbox only follows its pod; it is never re-bound or re-created. */
static int follow_bound(struct sbx_controller *c, const struct sbx_view *v)
{
	const char *pod_name = jstr(v->status, "podName");
	const char *pod_uid = jstr(v->status, "podUID");
	cJSON *pod = informer_get(c->pods, v->ns, pod_name);
	/* The cache may lag behind our own create: a pod this process created
	 * moments ago brings the Sandbox back with its own event; otherwise ask
	 * the API before saying "missing". A trimmed pod with too many containers
	 * to keep is read live. */
	if (!pod && sbx_written_lagging(c->created_pods, pod_uid, ""))
		return WRITTEN_RECHECK_MS;
	if (!pod || cJSON_IsTrue(jobj(jobj(pod, "spec"), "truncated"))) {
		cJSON_Delete(pod);
		if (sbx_rc_get_pod(c, v->ns, pod_name, &pod) < 0)
			return -1;
	}
	if (pod && (!meta_str(pod, "uid") || strcmp(meta_str(pod, "uid"), pod_uid))) {
		cJSON_Delete(pod); /* same name, another pod: ours is gone */
		pod = NULL;
	}
	/* Gone because the controller released it (another holder's view of v
	 * was older than v's resume): v resumes it, nothing went out of band. */
	if (!pod && sbx_lc_released(c, v, pod_name, NULL))
		return sbx_lc_resume(c, (struct sbx_view *)v);
	char why[256] = "", tmsg[400];
	int tampered = pod && pod_tampered(c, v, pod, why, sizeof why);
	const char *old_ready = jstr(sbx_status_condition(v->status, "Ready"), "reason");
	int reported = old_ready && !strcmp(old_ready, "PodTampered"); /* by this or an earlier process */
	int how = sbx_rc_binding_how(jstr(v->status, "binding"));
	const char *msg = jstr(sbx_status_condition(v->status, "Bound"), "message");
	struct sbx_status_in in = sbx_rc_bound_status(v, pod, pod_name, pod_uid, how, jstr(v->status, "claimedAt"),
					       jstr(v->status, "keyExpiresAt"), msg);
	if (tampered) {
		snprintf(tmsg, sizeof tmsg, "pod %s was changed out of band (%s); it is not re-created", pod_name,
			 why);
		in.ready = 0;
		in.ready_reason = "PodTampered";
		in.ready_message = tmsg;
	}
	int r = sbx_rc_write_status(c, v, &in);
	cJSON_Delete(pod);
	if (r >= 0 && in.ready)
		sbx_lc_ready(c, v);
	if (r >= 0 && tampered && !reported) {
		char key[64];
		snprintf(key, sizeof key, "tampered/%s", v->uid);
		/* Once per Sandbox: the set covers a cache that has not seen our write yet. */
		if (sbx_strset_add(c->announced, key)) {
			sbx_rc_event(c, v, "Warning", "PodTampered", tmsg);
			log_kv(LOG_WARN, "bound pod tampered", "sandbox", v->name, "namespace", v->ns, "pod", pod_name,
			       "reason", why);
		}
	}
	return r < 0 ? -1 : 0;
}

/* Adds v as a non-controller owner of pod, guarded by the pod's uid and
 * resourceVersion so the pod we verified is the pod we adopt. */
static enum kube_err add_owner(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod,
			       struct kube_error *err)
{
	cJSON *patch = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(patch, "metadata");
	cJSON_AddStringToObject(m, "uid", meta_str(pod, "uid"));
	cJSON_AddStringToObject(m, "resourceVersion", meta_str(pod, "resourceVersion"));
	cJSON *refs = cJSON_AddArrayToObject(m, "ownerReferences");
	cJSON *ref = cJSON_CreateObject();
	cJSON_AddStringToObject(ref, "apiVersion", SBX_API);
	cJSON_AddStringToObject(ref, "kind", "Sandbox");
	cJSON_AddStringToObject(ref, "name", v->name);
	cJSON_AddStringToObject(ref, "uid", v->uid);
	cJSON_AddFalseToObject(ref, "controller");
	cJSON_AddTrueToObject(ref, "blockOwnerDeletion");
	cJSON_AddItemToArray(refs, ref);
	char *body = cJSON_PrintUnformatted(patch);
	cJSON_Delete(patch);
	char path[512];
	path_pod(path, sizeof path, v->ns, meta_str(pod, "name"));
	enum kube_err e =
		kube_request(c->kc, "PATCH", path, NULL, body, "application/strategic-merge-patch+json", NULL, err);
	free(body);
	return e;
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

/* 1 when the live pod is certified for v (sbx_pod_payload_verify: the whole
 * pod, not only its sealed identity; a replayed seal on another payload is
 * foreign); else 0 with the reason in why. */
int sbx_rc_payload_matches(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, char *why,
			   size_t whylen)
{
	const char *claimed = annotation(pod, ANN_CLAIMED_AT), *seal = annotation(pod, SBX_ANN_SEAL);
	cJSON *want = claimed && seal ? sbx_rc_build_pod(c, v, meta_str(pod, "name"), annotation(pod, SBX_ANN_CLAIM),
						       claimed, seal)
				      : NULL;
	struct sbx_certify cert = { .expected = want, .spec = v->spec, .cfg = c->cfg };
	snprintf(why, whylen, "the controller cannot build a pod for this Sandbox");
	int ok = want && sbx_pod_payload_verify(pod, &cert, why, whylen) == SBX_VERIFY_OK;
	cJSON_Delete(want);
	return ok;
}

/* Whether the key had expired when v was made: 1 when the pod's claim is at
 * least a key lifetime older than v (judged on v's creationTimestamp, so
 * every replica decides alike), 0 when it was alive, -1 when the pod's
 * claimed-at cannot be read. */
static int key_expired(const struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod)
{
	time_t claimed = 0;
	if (ktime_parse_rfc3339(annotation(pod, ANN_CLAIMED_AT), &claimed) < 0)
		return -1;
	return claimed + c->cfg->key_lifetime_s <= v->created;
}

/* Decides what a pod found under a claim name means for v. The pod was read
 * live from the API. Never adopts anything that fails verification. */
enum sbx_examine sbx_rc_examine(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, int *delay)
{
	struct sbx_verify_expect ex = {
		.ns = v->ns,
		.owner = v->owner,
		.scope = &v->scope,
		.keys = c->seal_keys,
		.check_fingerprint = 0,
	};
	enum sbx_verify vr = sbx_pod_verify(pod, &ex);
	const char *pod_name = meta_str(pod, "name");
	char why[256] = "";
	if (vr == SBX_VERIFY_TERMINATING) {
		*delay = REQUEUE_WAIT_MS;
		char msg[256];
		snprintf(msg, sizeof msg, "pod %s is terminating; waiting for its name to be free", pod_name);
		return sbx_rc_report_unbound(c, v, "Pending", "Waiting", msg, NULL) < 0 ? EX_RETRY : EX_DONE;
	}
	if (vr != SBX_VERIFY_OK) {
	foreign:
		obs_metric_add(sbx_m.foreign_pods, NULL, 1);
		char msg[640];
		snprintf(msg, sizeof msg,
			 "pod %s exists but was not created by sandbox-controller for this scope (%s%s%s); it is not "
			 "adopted",
			 pod_name ? pod_name : "?", sbx_verify_str(vr), why[0] ? ": " : "", why);
		log_kv(LOG_WARN, "foreign pod rejected", "sandbox", v->name, "namespace", v->ns, "pod", pod_name,
		       "reason", sbx_verify_str(vr), "detail", why);
		*delay = REQUEUE_FOREIGN_MS;
		return sbx_rc_report_unbound(c, v, "Pending", "ForeignPodConflict", msg, "ForeignPodRejected") < 0
			       ? EX_RETRY
			       : EX_DONE;
	}
	int is_controller = 0;
	int ours = owned_by(pod, v->uid, &is_controller);
	const char *fp = annotation(pod, "sandbox.dev/spec-fingerprint");
	if (fp && !strcmp(fp, v->scope.fingerprint) && !sbx_rc_payload_matches(c, v, pod, why, sizeof why)) {
		vr = SBX_VERIFY_PAYLOAD_MISMATCH;
		goto foreign;
	}
	if (!ours) {
		int expired = key_expired(c, v, pod);
		if (expired < 0)
			return EX_RETRY; /* the seal covered claimed-at, so this cannot happen */
		if (expired)
			return EX_NEXT_GENERATION;
		if (!fp || strcmp(fp, v->scope.fingerprint)) {
			obs_metric_add(sbx_m.key_conflicts, NULL, 1);
			const char *holder = controller_owner_name(pod);
			char msg[512];
			snprintf(msg, sizeof msg,
				 "idempotency key is held by Sandbox %s (pod %s) with a different spec; "
				 "use another key or the same spec",
				 holder ? holder : "(deleted)", pod_name);
			*delay = 0;
			return sbx_rc_report_unbound(c, v, "Rejected", "IdempotencyKeyConflict", msg,
					      "IdempotencyKeyConflict") < 0
				       ? EX_RETRY
				       : EX_DONE;
		}
		struct kube_error err;
		enum kube_err e = add_owner(c, v, pod, &err);
		if (e == KUBE_ERR_NOT_FOUND || e == KUBE_ERR_CONFLICT)
			return EX_RETRY_SOON; /* the pod changed under us: look again */
		if (e != KUBE_OK) {
			log_kv(LOG_WARN, "adopting pod failed", "sandbox", v->name, "namespace", v->ns, "pod", pod_name,
			       "error", err.message);
			return EX_RETRY;
		}
		fault_point("after-adopt");
	}
	*delay = 0;
	int how = ours && is_controller ? SBX_BIND_CREATED : SBX_BIND_ADOPTED;
	return sbx_rc_report_bound(c, v, pod, how) < 0 ? EX_RETRY : EX_DONE;
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
	char *body = cJSON_PrintUnformatted(pod);
	cJSON_Delete(pod);
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", v->ns);
	fault_point("before-pod-create");
	enum kube_err e = kube_request(c->kc, "POST", path, NULL, body, NULL, out, err);
	free(body);
	if (e == KUBE_OK)
		sbx_written_put(c->created_pods, meta_str(*out, "uid"), meta_str(*out, "resourceVersion"));
	fault_point("after-pod-create");
	return e;
}

/* Pod-field paths the Sandbox spec controls (the container built from it and
 * the runtime class): a validation failure there is the spec's own fault. */
static int spec_controlled_field(const char *f)
{
	static const char *const container[] = { "image", "command", "args", "env", "resources", NULL };
	if (!strcmp(f, "spec.runtimeClassName"))
		return 1;
	if (strncmp(f, "spec.containers[", 16))
		return 0;
	const char *close = strchr(f + 16, ']');
	if (!close || close[1] != '.')
		return 0;
	for (const char *const *k = container; *k; k++) {
		size_t n = strlen(*k);
		if (!strncmp(close + 2, *k, n) && (close[2 + n] == '\0' || close[2 + n] == '[' || close[2 + n] == '.'))
			return 1;
	}
	return 0;
}

int sbx_pod_refusal_is_final(const struct kube_error *e)
{
	if (e->code != KUBE_ERR_INVALID || strcmp(e->reason, "Invalid") || e->ncauses == 0 ||
	    e->ncauses != e->ncauses_total)
		return 0;
	/* Admission (policies, webhooks) may answer 422 too: that is a decision
	 * about this cluster now, not about the spec. */
	if (strstr(e->message, "admission webhook") || strstr(e->message, "ValidatingAdmissionPolicy") ||
	    strstr(e->message, "denied request") || strstr(e->message, "denied the request"))
		return 0;
	for (int i = 0; i < e->ncauses; i++) {
		const struct kube_error_cause *k = &e->causes[i];
		if (strncmp(k->reason, "FieldValue", 10) || !strcmp(k->reason, "FieldValueForbidden") ||
		    !spec_controlled_field(k->field))
			return 0;
	}
	return 1;
}

/* Logs a failed pod create, at most about once a second for the whole
 * process (a broken admission chain fails every Sandbox alike). */
static void log_create_failure(const struct sbx_view *v, const char *pod_name, enum kube_err e, const char *msg)
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
	log_kv(LOG_WARN, "creating pod failed", "sandbox", v->name, "namespace", v->ns, "pod", pod_name, "error",
	       kube_err_str(e), "message", msg, "suppressedSinceLast", n);
}

/* The API refused or lost the create of pod_name: say why on the Sandbox and
 * retry with the per-Sandbox backoff (never sooner than Retry-After). */
static int create_failed(struct sbx_controller *c, struct sbx_view *v, const char *pod_name, enum kube_err e,
			 const struct kube_error *err)
{
	log_create_failure(v, pod_name, e, err->message);
	char msg[700];
	snprintf(msg, sizeof msg, "creating pod %s failed (%s): %s; retrying", pod_name, kube_err_str(e),
		 err->message);
	sbx_rc_report_unbound(c, v, "Pending", "Waiting", msg, NULL);
	v->retry_after_ms = (long)err->retry_after_s * 1000;
	return -1;
}

/* The generation n of pod name for v's digest ("sbx-<d>" 0, "sbx-<d>-<n>"
 * n), or -1 when the name is not one of v's generations. */
static long generation_of(const struct sbx_view *v, const char *name)
{
	char base[80];
	sbx_pod_name(&v->scope, 0, base, sizeof base);
	size_t n = strlen(base);
	if (!name || strncmp(name, base, n))
		return -1;
	if (!name[n])
		return 0;
	const char *d = name + n + 1;
	if (name[n] != '-' || *d < '1' || *d > '9' || strlen(d) > 5)
		return -1;
	for (const char *p = d; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	long g = strtol(d, NULL, 10);
	return g < MAX_GENERATIONS ? g : -1;
}

struct generations {
	const struct sbx_view *v;
	cJSON *pods; /* v's generations, as listed */
	long newest; /* -1: none */
};

const char *sbx_rc_claim_of(const cJSON *pod)
{
	const char *cl = annotation(pod, SBX_ANN_CLAIM);
	return cl ? cl : meta_str(pod, "name");
}

/* Keeps a listed pod of v's digest by its generation (its claim name: a warm
 * pod bound to the scope is not named after it). */
static void collect_generation(void *ctx, const cJSON *pod)
{
	struct generations *g = ctx;
	long n = generation_of(g->v, sbx_rc_claim_of(pod));
	if (n < 0)
		return;
	cJSON *d = cJSON_Duplicate(pod, 1);
	if (!d || !cJSON_AddItemToArray(g->pods, d))
		abort(); /* out of memory */
	if (n > g->newest)
		g->newest = n;
}

static void reset_generations(void *ctx)
{
	struct generations *g = ctx;
	cJSON_Delete(g->pods);
	g->pods = cJSON_CreateArray();
	g->newest = -1;
}

/* Removes and returns the listed pod of claim name `name` (caller frees), or
 * NULL. */
static cJSON *take_listed(struct generations *g, const char *name)
{
	cJSON *p;
	cJSON_ArrayForEach(p, g->pods)
	{
		const char *n = sbx_rc_claim_of(p);
		if (n && !strcmp(n, name))
			return cJSON_DetachItemViaPointer(g->pods, p);
	}
	return NULL;
}

/* 1 when the pod cache may stand in for the live LIST of v's generations:
 * it is current and holds no pod of v's digest, and the key lifetime is at
 * least CACHED_CLAIM_MIN_LIFETIME_S.
 *
 * Why that is enough. The live read exists so that a gap (generation n
 * deleted while a later one lives) is never refilled. A cache is a consistent
 * prefix of the pod history (one watch, delivered in order). If it shows no
 * pod of the digest while the API holds a later generation m > 0 and not
 * generation 0..m-1: generation m was created while an expired earlier one
 * existed, and that one was deleted after. Had the earlier one existed at
 * the cache's point in history, the cache would show it (or, having seen its
 * deletion, would show m, created before it). So it was created after that
 * point, and outlived its whole key lifetime before m was claimed: the cache
 * lags by more than a key lifetime. An informer that has had no watch for a
 * minute is not current, so with lifetimes of ten minutes and more (the
 * default is 24 h) that cannot happen; shorter lifetimes always read live.
 * With nothing in the way, the create itself is the check: AlreadyExists
 * (another replica, a lost response) is read back and verified as before. */
#define CACHED_CLAIM_MIN_LIFETIME_S 600

static int cache_has_no_generation(struct sbx_controller *c, const struct sbx_view *v)
{
	/* A pod of the digest left lately: released, its record may not have
	 * reached the record cache yet (live reads see it, see claim). */
	if (c->cfg->key_lifetime_s < CACHED_CLAIM_MIN_LIFETIME_S || !informer_wait_synced(c->pods, 0) ||
	    (c->claims && !informer_wait_synced(c->claims, 0)) ||
	    (c->pods_gone && sbx_strset_has(c->pods_gone, v->scope.digest)))
		return 0;
	cJSON *pods = informer_list_by_index(c->pods, v->scope.digest);
	int none = cJSON_GetArraySize(pods) == 0;
	cJSON_Delete(pods);
	return none;
}

/* The live claim record name of v's digest into *out (NULL: none, or one
 * that does not verify, which counts for nothing). 0, or -1 when it cannot
 * be read. */
static int live_record(struct sbx_controller *c, const struct sbx_view *v, const char *name, cJSON **out)
{
	char path[600], why[128];
	struct kube_error err;
	struct sbx_claimrec rec;
	*out = NULL;
	snprintf(path, sizeof path, "/apis/" SBX_CLAIM_API "/namespaces/%s/" SBX_CLAIM_PLURAL "/%s", v->ns, name);
	enum kube_err e = kube_request(c->kc, "GET", path, NULL, NULL, NULL, out, &err);
	if (e == KUBE_ERR_NOT_FOUND)
		return 0;
	if (e != KUBE_OK)
		return -1; /* never claim on a guess */
	if (sbx_claimrec_parse(*out, v->ns, c->seal_keys, &rec, why, sizeof why) < 0 ||
	    strcmp(rec.digest, v->scope.digest)) {
		cJSON_Delete(*out);
		*out = NULL;
	}
	return 0;
}

/* Claims a pod for v. The newest generation of v's key decides, read live (a
 * LIST by the digest label) unless the cache shows none: an older generation,
 * or a gap a deleted one left, is never claimed while a later one exists.
 * When read live, a generation about to get its first pod has its record
 * read live too: the pods are read after the release deleted one, so the
 * record written before that delete is there, whatever the record cache
 * shows yet. */
static int claim(struct sbx_controller *c, struct sbx_view *v)
{
	struct generations g = { .v = v, .pods = cJSON_CreateArray(), .newest = -1 };
	struct kube_error err;
	enum kube_err e;
	/* The claim records of the key's generations whose pods were released
	 * (sandbox/claimrec.h): they count as generations too. */
	cJSON *recs = v->key ? sbx_lc_records(c, v) : cJSON_CreateArray();
	long newest_rec = -1;
	const cJSON *rec;
	cJSON_ArrayForEach(rec, recs)
	{
		long n = generation_of(v, meta_str(rec, "name"));
		if (n > newest_rec)
			newest_rec = n;
	}
	int live = !cache_has_no_generation(c, v);
	cJSON *fetched = NULL; /* a record read live, for the generation looked at */
	if (live) {
		char sel[128], lpath[320];
		snprintf(sel, sizeof sel, LABEL_DIGEST "=%s", v->scope.digest);
		snprintf(lpath, sizeof lpath, "/api/v1/namespaces/%s/pods", v->ns);
		e = kube_list_ex(c->kc, lpath, sel, collect_generation, reset_generations, &g, NULL, NULL, &err);
		if (e != KUBE_OK) {
			cJSON_Delete(g.pods);
			v->retry_after_ms = (long)err.retry_after_s * 1000;
			return -1; /* never claim on a guess */
		}
	}
	int r = -1;
	long newest = g.newest > newest_rec ? g.newest : newest_rec;
	unsigned n = newest > 0 ? (unsigned)newest : 0;
	for (; n < MAX_GENERATIONS; n++) {
		char pod_name[80], path[512];
		sbx_pod_name(&v->scope, n, pod_name, sizeof pod_name); /* the claim name */
		cJSON *pod = take_listed(&g, pod_name);
		const cJSON *record = NULL;
		cJSON_ArrayForEach(rec, recs)
		{
			if (meta_str(rec, "name") && !strcmp(meta_str(rec, "name"), pod_name))
				record = rec;
		}
		cJSON_Delete(fetched);
		fetched = NULL;
		if (!pod && !record && live && v->key) {
			if (live_record(c, v, pod_name, &fetched) < 0)
				goto out;
			record = fetched;
		}
		if (!pod && record) {
			/* The generation's record speaks for its missing pod: released
			 * (Suspended, Expired), or claimed (Bound) and not yet there. */
			int delay = 0;
			enum sbx_examine x = sbx_lc_claim_record(c, v, record, &delay);
			if (x == EX_NEXT_GENERATION)
				continue;
			if (x != EX_CREATE) {
				r = x == EX_DONE ? delay : x == EX_RETRY_SOON ? REQUEUE_BUSY_MS : -1;
				goto out;
			}
			/* the record is the claim: its cold pod is created below */
		}
		char holder[254];
		if (pod && !owned_by(pod, v->uid, NULL) && key_expired(c, v, pod) == 0 &&
		    sbx_lc_pod_expired(c, v, pod, holder, sizeof holder)) {
			/* Every Sandbox of the generation expired, though the pod is
			 * not released yet (the controller was down, or is at it now):
			 * the stored outcome, never a share of an expired pod. */
			char until[32] = "";
			time_t t;
			if (ktime_parse_rfc3339(annotation(pod, ANN_CLAIMED_AT), &t) == 0)
				ktime_format_rfc3339(t + c->cfg->key_lifetime_s, until);
			r = sbx_lc_report_expired_key(c, v, holder, meta_str(pod, "name"), until[0] ? until : NULL);
			cJSON_Delete(pod);
			goto out;
		}
		/* A fresh generation where a warm pool may serve: the claim goes
		 * through the generation's record (reconcile/warm.h), warm or cold. */
		if (!pod && !record && sbx_warm_record_namespace(c, v->ns) && sbx_warm_claim(c, v, pod_name, &r))
			goto out;
		if (!pod) {
			e = sbx_rc_create_pod(c, v, pod_name, NULL, NULL, &pod, &err);
			if (e == KUBE_OK) {
				int delay = 0;
				enum sbx_examine x = sbx_rc_examine(c, v, pod, &delay);
				cJSON_Delete(pod);
				r = x == EX_DONE ? delay : -1;
				goto out;
			}
			if ((e == KUBE_ERR_INVALID || e == KUBE_ERR_BAD_REQUEST) && sbx_pod_refusal_is_final(&err)) {
				char msg[600];
				snprintf(msg, sizeof msg, "the pod for this Sandbox was refused by the API: %s",
					 err.message);
				r = sbx_rc_report_unbound(c, v, "Rejected", "InvalidSpec", msg, "InvalidSpec") < 0 ? -1 : 0;
				goto out;
			}
			if (e != KUBE_ERR_ALREADY_EXISTS && !kube_err_retriable(e)) {
				/* Forbidden (quota, admission), a policy's 422, Unauthorized...:
				 * say why on the Sandbox while the work queue retries. */
				r = create_failed(c, v, pod_name, e, &err);
				goto out;
			}
			/* AlreadyExists, or the outcome is unknown (lost response): GET and verify. */
			struct kube_error gerr;
			path_pod(path, sizeof path, v->ns, pod_name);
			enum kube_err ge = kube_request(c->kc, "GET", path, NULL, NULL, NULL, &pod, &gerr);
			if (ge == KUBE_ERR_NOT_FOUND) {
				/* AlreadyExists then gone: it was just deleted, claim again
				 * soon. Otherwise the create failed (5xx, 429, transport):
				 * back off, per Sandbox. */
				r = e == KUBE_ERR_ALREADY_EXISTS ? REQUEUE_BUSY_MS : create_failed(c, v, pod_name, e, &err);
				goto out;
			}
			if (ge != KUBE_OK) {
				v->retry_after_ms = (long)gerr.retry_after_s * 1000;
				goto out; /* never adopt on a guess */
			}
		}
		int delay = 0;
		enum sbx_examine x = sbx_rc_examine(c, v, pod, &delay);
		cJSON_Delete(pod);
		switch (x) {
		case EX_DONE:
			r = delay;
			goto out;
		case EX_NEXT_GENERATION:
			continue;
		case EX_RETRY_SOON:
			r = REQUEUE_BUSY_MS;
			goto out;
		case EX_RETRY:
		case EX_CREATE: /* not an outcome of examining a pod */
			goto out;
		}
	}
	log_kv(LOG_ERROR, "too many expired generations for one key", "sandbox", v->name, "namespace", v->ns);
out:
	cJSON_Delete(fetched);
	cJSON_Delete(g.pods);
	cJSON_Delete(recs);
	return r;
}

/* Whether the product's mutating webhook was in force for operation on v's
 * namespace at `made` (reconcile/inforce.h): 1 when it was. Otherwise 0, with
 * Bound=False/OwnerNotAuthorized reported and *r the reconcile's result: 0
 * (done: the Sandbox is looked at again when it changes), a delay while the
 * configuration's cache has not synced, or -1 when the report failed. */
int sbx_rc_webhook_in_force(struct sbx_controller *c, struct sbx_view *v, const char *operation, time_t made,
				int *r)
{
	char why[512], msg[700];
	if (!c->webhooks || !informer_wait_synced(c->webhooks, 0)) {
		snprintf(msg, sizeof msg, "workspace owner %s: waiting to read the MutatingWebhookConfiguration %s",
			 v->owner, c->webhook_config);
		*r = sbx_rc_report_unbound(c, v, "Pending", "Waiting", msg, NULL) < 0 ? -1 : REQUEUE_WAIT_MS;
		return 0;
	}
	cJSON *mwc = c->webhook_config[0] ? informer_get(c->webhooks, NULL, c->webhook_config) : NULL;
	int ok = sbx_inforce_check(c->inforce, mwc, SBX_MUTATING_WEBHOOK, "sandboxes", operation, v->ns, made, why,
				   sizeof why);
	cJSON_Delete(mwc);
	if (ok)
		return 1;
	snprintf(msg, sizeof msg,
		 "workspace owner %s: the admission webhook was not in force for this Sandbox (%s), so its owner "
		 "authorization cannot be trusted; no pod is created",
		 v->owner, why);
	*r = sbx_rc_report_unbound(c, v, "Rejected", "OwnerNotAuthorized", msg, "OwnerNotAuthorized");
	return 0;
}

/* The reconcile's result r, brought forward to v's shutdownTime when that
 * comes first (a timer in the work queue's delay heap, not a poll). */
static int shutdown_timer(struct sbx_view *v, int r)
{
	if (r < 0 || !v->lc.has_shutdown || v->lc.shutdown <= v->now)
		return r;
	double ms = ((double)v->lc.shutdown - (double)v->now) * 1000 + 50;
	if (ms > 7 * 86400 * 1000.0)
		ms = 7 * 86400 * 1000.0; /* looked at again then */
	if (r != 0 && ms >= r)
		return r;
	v->timer = 1;
	return (int)ms;
}

long sbx_rc_key_lifetime(const struct sbx_controller *c)
{
	return c->cfg->key_lifetime_s;
}

static int view_init(struct sbx_view *v, const cJSON *obj)
{
	memset(v, 0, sizeof *v);
	v->obj = obj;
	const cJSON *m = jobj(obj, "metadata");
	v->ns = jstr(m, "namespace");
	v->name = jstr(m, "name");
	v->uid = jstr(m, "uid");
	const cJSON *g = jobj(m, "generation");
	v->generation = cJSON_IsNumber(g) ? (long long)g->valuedouble : 0;
	if (!v->ns || !v->name || !v->uid || ktime_parse_rfc3339(jstr(m, "creationTimestamp"), &v->created) < 0)
		return -1;
	v->spec = jobj(obj, "spec");
	v->status = jobj(obj, "status");
	v->owner = jstr(v->spec, "workspaceOwner");
	v->key = jstr(v->spec, "idempotencyKey");
	v->now = time(NULL);
	char msg[256];
	sbx_lifecycle_parse(v->spec, &v->lc, msg, sizeof msg); /* an invalid one is refused by validation */
	return 0;
}

static int terminal_rejection(const struct sbx_view *v)
{
	const char *phase = jstr(v->status, "phase");
	const cJSON *og = jobj(v->status, "observedGeneration");
	const char *reason = old_bound_reason(v);
	return phase && !strcmp(phase, "Rejected") && cJSON_IsNumber(og) &&
	       (long long)og->valuedouble == v->generation && reason &&
	       (!strcmp(reason, "IdempotencyKeyConflict") || !strcmp(reason, "InvalidSpec"));
}

int sbx_reconcile(struct sbx_controller *c, const char *key)
{
	return sbx_reconcile_ex(c, key, NULL);
}

int sbx_reconcile_ex(struct sbx_controller *c, const char *key, struct sbx_reconcile_result *res)
{
	if (res)
		*res = (struct sbx_reconcile_result){ 0 };
	const char *slash = strchr(key, '/');
	if (!slash)
		return 0;
	char *ns = xstrndup(key, (size_t)(slash - key));
	cJSON *obj = informer_get(c->sandboxes, ns, slash + 1);
	free(ns);
	if (!obj)
		return 0; /* deleted: the garbage collector takes its pod */
	obs_metric_add(sbx_m.reconciles, NULL, 1);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct sbx_view v;
	int r = 0;
	if (view_init(&v, obj) < 0 || meta_str(obj, "deletionTimestamp"))
		goto out;
	if (sbx_written_lagging(c->written, v.uid, meta_str(obj, "resourceVersion"))) {
		r = WRITTEN_RECHECK_MS; /* our own write's event requeues it sooner */
		goto out;
	}
	char msg[512];
	const cJSON *oversized = jobj(obj, SBX_TRIM_OVERSIZED);
	if (!cJSON_IsObject(v.spec) || sbx_spec_validate(v.spec, msg, sizeof msg) < 0) {
		if (cJSON_IsNumber(oversized))
			snprintf(msg, sizeof msg, "spec is about %.0f bytes; this controller accepts at most %d",
				 oversized->valuedouble, SBX_SPEC_KEEP_MAX);
		else if (!cJSON_IsObject(v.spec))
			snprintf(msg, sizeof msg, "spec is missing");
		r = sbx_rc_report_unbound(c, &v, "Rejected", "InvalidSpec", msg, "InvalidSpec");
		goto out;
	}
	if (sbx_scope_compute(v.ns, v.uid, v.spec, &v.scope, msg, sizeof msg) < 0) {
		r = sbx_rc_report_unbound(c, &v, "Rejected", "InvalidSpec", msg, "InvalidSpec");
		goto out;
	}
	const char *bound_digest = jstr(v.status, "scopeDigest"), *phase = jstr(v.status, "phase");
	int bound = jstr(v.status, "podName") && jstr(v.status, "podUID") && jstr(v.status, "binding") &&
		    bound_digest && !strcmp(bound_digest, v.scope.digest);
	/* Lifecycle first (contract section 5a): Expired is final, a suspended
	 * Sandbox holds no pod, a resumed one is authorized anew. */
	if ((phase && !strcmp(phase, "Expired")) || sbx_lifecycle_expired(&v.lc, v.now)) {
		r = sbx_lc_expire(c, &v);
		goto out;
	}
	if (v.lc.suspend) {
		r = sbx_lc_suspend(c, &v, bound);
		goto timer;
	}
	if (bound) {
		r = phase && !strcmp(phase, "Suspended") ? sbx_lc_resume(c, &v) : follow_bound(c, &v);
		goto timer;
	}
	if (terminal_rejection(&v))
		goto out;
	const char *rc_name;
	if (sbx_pod_runtime_class(v.spec, c->cfg, &rc_name, msg, sizeof msg) < 0) {
		r = sbx_rc_report_unbound(c, &v, "Rejected", "InvalidSpec", msg, "InvalidSpec");
		goto out;
	}
	/* Never mount a workspace whose authorization cannot be verified. */
	if (!sbx_lc_owner_authorized(c, &v, 1, &r))
		goto out;
	if (!sbx_strset_add(c->inflight, v.scope.digest)) {
		r = REQUEUE_BUSY_MS;
		goto out;
	}
	r = claim(c, &v);
	sbx_strset_del(c->inflight, v.scope.digest);
timer:
	r = shutdown_timer(&v, r);
	if (res) {
		res->retry_after_ms = v.retry_after_ms;
		res->timer = v.timer;
	}
out:
	if (r < 0) {
		obs_metric_add(sbx_m.errors, NULL, 1);
		obs_metric_add(sbx_m.cr_errors, sbx_ctl_label, 1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	obs_metric_observe(sbx_m.cr_time, sbx_ctl_label,
			   (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	const char *result[] = { "sandbox", r < 0 ? "error" : r > 0 ? "requeue_after" : "success" };
	obs_metric_add(sbx_m.cr_total, result, 1);
	cJSON_Delete(obj);
	return r;
}
