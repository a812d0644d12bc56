#include "reconcile/lifecycle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "base/jsonget.h"
#include "base/ktime.h"
#include "base/strmap.h"
#include "base/xmalloc.h"
#include "kube/informer.h"
#include "obs/log.h"
#include "obs/metrics.h"
#include "reconcile/ctlmetrics.h"
#include "reconcile/examine.h"
#include "reconcile/inforce.h"
#include "reconcile/quota.h"
#include "reconcile/reauthz.h"
#include "reconcile/records.h"
#include "reconcile/state.h"
#include "reconcile/strset.h"
#include "reconcile/warm.h"
#include "reconcile/writes.h"
#include "reconcile/written.h"
#include "reconcile/wsgate.h"
#include "sandbox/authz.h"
#include "sandbox/claimrec.h"
#include "sandbox/config.h"
#include "sandbox/netprofile.h"
#include "sandbox/podbuild.h"
#include "sandbox/scope.h"
#include "sandbox/spec.h"
#include "sandbox/trim.h"
#include "sandbox/verify.h"

enum holder { H_ACTIVE,
	      H_SUSPENDED,
	      H_EXPIRED,
	      H_GONE };

/* How long a pod whose release DELETE was answered counts as going, though
 * the pod cache may still show it live: a DELETE accepted for a uid is never
 * undone, and the reconcile our own status write brings back must not write
 * the record and DELETE it a second time (both answered 409). */
#define RELEASED_MS 60000

static int claim_name_for(struct sbx_controller *c, const struct sbx_view *v, const char *pod_name, char *out,
			  size_t n);

/* What the cached Sandbox ns/name (it must be uid) is to the pod of scope
 * digest it holds. A Sandbox of another scope holds no pod of this one,
 * whatever the pod's owner references say: only Sandboxes of one scope share
 * a pod, and references someone else wrote must neither keep a pod running
 * nor make its generation expired. */
static enum holder holder_state(struct sbx_controller *c, const char *ns, const char *name, const char *uid, time_t now,
				const char *digest)
{
	cJSON *o = informer_get(c->sandboxes, ns, name);
	enum holder h = H_GONE;
	struct sbx_scope sc;
	char msg[256];
	if (o && meta_str(o, "uid") && !strcmp(meta_str(o, "uid"), uid) && !meta_str(o, "deletionTimestamp") &&
	    sbx_scope_compute(ns, uid, jobj(o, "spec"), &sc, msg, sizeof msg) == 0 && !strcmp(sc.digest, digest)) {
		struct sbx_lifecycle l;
		const char *phase = jstr(jobj(o, "status"), "phase");
		if (sbx_lifecycle_parse(jobj(o, "spec"), &l, msg, sizeof msg) < 0)
			h = H_ACTIVE; /* cannot tell: keep the pod */
		else if ((phase && !strcmp(phase, "Expired")) || sbx_lifecycle_expired(&l, now))
			h = H_EXPIRED;
		else if (l.suspend)
			h = H_SUSPENDED;
		else
			h = H_ACTIVE;
	}
	cJSON_Delete(o);
	return h;
}

static const cJSON *owner_refs(const cJSON *obj)
{
	return jobj(jobj(obj, "metadata"), "ownerReferences");
}

struct holders {
	int active, suspended, expired;
	char expired_name[254];
	cJSON *refs; /* ownerReferences of the holders still there */
};

/* Counts the Sandboxes holding a pod or a record (refs: its owner
 * references; the Sandbox ones count) by state; v itself counts as self. */
static void count_holders(struct sbx_controller *c, const struct sbx_view *v, enum holder self, const cJSON *refs,
			  struct holders *h)
{
	memset(h, 0, sizeof *h);
	h->refs = cJSON_CreateArray();
	const cJSON *ref;
	cJSON_ArrayForEach(ref, refs)
	{
		const char *kind = jstr(ref, "kind"), *name = jstr(ref, "name"), *uid = jstr(ref, "uid");
		if (!kind || strcmp(kind, "Sandbox") || !name || !uid)
			continue;
		enum holder s = !strcmp(uid, v->uid) ? self : holder_state(c, v->ns, name, uid, v->now, v->scope.digest);
		if (s == H_ACTIVE)
			h->active++;
		else if (s == H_SUSPENDED)
			h->suspended++;
		else if (s == H_EXPIRED && ++h->expired == 1)
			snprintf(h->expired_name, sizeof h->expired_name, "%s", name);
		if (s != H_GONE)
			cJSON_AddItemToArray(h->refs, sbx_rc_sandbox_ref(name, uid));
	}
}

/* Releases v's pod pod_name (uid pod_uid) when no active Sandbox holds it
 * any more (v itself being self): the claim record first (keyed Sandboxes:
 * only they can be shared or retried), then the delete, guarded by the pod's
 * uid and resourceVersion so that a Sandbox adopting it meanwhile keeps it.
 * A pod no Sandbox holds at all (v, being deleted, held it alone) gets no
 * record: as when the garbage collector takes a deleted Sandbox's pod, a
 * later Sandbox of the key is a new claim, not the stored outcome of an
 * expiry. Returns 0, a delay, -1. */
static int release_pod(struct sbx_controller *c, struct sbx_view *v, enum holder self, const char *pod_name,
		       const char *pod_uid)
{
	if (!pod_name || !pod_uid)
		return 0;
	cJSON *pod = informer_get(c->pods, v->ns, pod_name);
	if (!pod || !meta_str(pod, "uid") || strcmp(meta_str(pod, "uid"), pod_uid) || meta_str(pod, "deletionTimestamp")) {
		cJSON_Delete(pod);
		return 0; /* gone, going, or another pod of the name: not ours to release */
	}
	if (c->released && sbx_strset_has(c->released, pod_uid)) {
		cJSON_Delete(pod);
		return 0; /* our DELETE of this very pod was answered: the cache lags */
	}
	/* More holders than the cache keeps: who holds it is read live (a
	 * holder beyond them may be active). */
	if (cJSON_IsTrue(jobj(jobj(pod, "metadata"), SBX_TRIM_REFS_TRUNCATED))) {
		cJSON_Delete(pod);
		pod = NULL;
		if (sbx_rc_get_pod(c, v->ns, pod_name, &pod) < 0)
			return -1;
		if (!pod || !meta_str(pod, "uid") || strcmp(meta_str(pod, "uid"), pod_uid) ||
		    meta_str(pod, "deletionTimestamp")) {
			cJSON_Delete(pod);
			return 0;
		}
	}
	struct holders h;
	count_holders(c, v, self, owner_refs(pod), &h);
	int r = 0;
	if (h.active) {
		r = 0; /* another Sandbox still uses it */
	} else {
		if (v->key && (self != H_GONE || h.suspended || h.expired)) {
			int susp = h.suspended > 0;
			r = sbx_rec_put_released(c, v, pod, susp ? SBX_CLAIM_SUSPENDED : SBX_CLAIM_EXPIRED,
						 susp || !h.expired_name[0] ? v->name : h.expired_name, h.refs);
			fault_point("after-claim-record");
		}
		if (r == 0) {
			char path[600];
			snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", v->ns, pod_name);
			fault_point("before-pod-delete");
			r = sbx_rc_delete(c, path, pod_uid, meta_str(pod, "resourceVersion"));
			if (r == 0) {
				if (c->released)
					sbx_strset_add_for(c->released, pod_uid, RELEASED_MS);
				log_kv(LOG_INFO, "pod released", "sandbox", v->name, "namespace", v->ns, "pod", pod_name,
				       "suspendedHolders", h.suspended ? "yes" : "no");
				fault_point("after-pod-delete");
			}
		}
	}
	cJSON_Delete(h.refs);
	cJSON_Delete(pod);
	return r;
}

/* release_pod for the pod v's status names. */
static int release(struct sbx_controller *c, struct sbx_view *v, enum holder self)
{
	return release_pod(c, v, self, jstr(v->status, "podName"), jstr(v->status, "podUID"));
}

/* release_pod for a pod v holds though its status names none: the
 * controller stopped between creating (or taking, or adopting) it and the
 * status write, and v is now suspended or expired. The pod is a cached one
 * of v's scope with v among its owners. */
static int release_unreported(struct sbx_controller *c, struct sbx_view *v, enum holder self)
{
	cJSON *pods = informer_list_by_index(c->pods, v->scope.digest);
	const cJSON *p;
	int r = 0;
	cJSON_ArrayForEach(p, pods)
	{
		const char *ns = meta_str(p, "namespace");
		if (!r && ns && !strcmp(ns, v->ns) && sbx_rc_owned_by(p, v->uid, NULL))
			r = release_pod(c, v, self, meta_str(p, "name"), meta_str(p, "uid"));
	}
	cJSON_Delete(pods);
	return r;
}

/* Logs and records an event once per transition: key "<what>/<uid>";
 * forgets other, the opposite transition. Returns 1 the first time. */
static int once(struct sbx_controller *c, const struct sbx_view *v, const char *what, const char *other)
{
	char key[96];
	if (other) {
		snprintf(key, sizeof key, "%s/%s", other, v->uid);
		sbx_strset_del(c->announced, key);
	}
	snprintf(key, sizeof key, "%s/%s", what, v->uid);
	return sbx_strset_add(c->announced, key);
}

static int bound_here(const struct sbx_view *v)
{
	const char *d = jstr(v->status, "scopeDigest");
	return jstr(v->status, "podName") && jstr(v->status, "podUID") && d && !strcmp(d, v->scope.digest);
}

/* The status of a bound v that does not hold its pod now. */
static struct sbx_status_in not_holding(const struct sbx_view *v, const char *phase, const char *reason,
					const char *msg)
{
	struct sbx_status_in in =
	    sbx_rc_bound_status(v, NULL, jstr(v->status, "podName"), jstr(v->status, "podUID"),
				sbx_rc_binding_how(jstr(v->status, "binding")), jstr(v->status, "claimedAt"),
				jstr(v->status, "keyExpiresAt"), jstr(sbx_status_condition(v->status, "Bound"), "message"));
	in.phase = phase;
	in.ready = 0;
	in.ready_reason = reason;
	in.ready_message = msg;
	in.pod_ip = NULL;
	return in;
}

/* not_holding, and Bound=False for reason (its message msg). */
static struct sbx_status_in unbound_holding(const struct sbx_view *v, const char *phase, const char *reason,
					    const char *msg)
{
	struct sbx_status_in in = not_holding(v, phase, reason, msg);
	in.bound = 0;
	in.bound_reason = reason;
	in.bound_message = msg;
	return in;
}

/* Reports that v's run is not authorized (reason, and a Warning event named
 * event when the reason is new): a resume (v bound here and Suspended)
 * stays Suspended and bound to its generation, as one refused when its pod
 * comes late does, out of its quota's line (quota.c, wants_slot); so
 * suspending and resuming it again is taken up as a resume. Anything else
 * is unbound in phase. Either way a quota slot v took for a pod not made
 * yet is given back. 0, REQUEUE_BUSY_MS, or -1. */
static int refuse_run(struct sbx_controller *c, const struct sbx_view *v, const char *phase, const char *reason,
		      const char *msg, const char *event)
{
	sbx_quota_release_pending(c, v); /* as sbx_lc_claim_allowed */
	const char *now = jstr(v->status, "phase");
	if (!bound_here(v) || !now || strcmp(now, "Suspended"))
		return sbx_rc_report_unbound(c, v, phase, reason, msg, event);
	const char *old = jstr(sbx_status_condition(v->status, "Bound"), "reason");
	int changed = !old || strcmp(old, reason);
	struct sbx_status_in in = unbound_holding(v, "Suspended", reason, msg);
	int w = sbx_rc_write_status_guarded(c, v, &in);
	if (w == 1 && changed && event)
		sbx_rc_event(c, v, "Warning", event, msg);
	return w < 0 ? -1 : w == REQUEUE_BUSY_MS ? w
						 : 0;
}

/* v expired bound to a generation whose pod was released while it was
 * suspended (its record Suspended): once none of the record's holders can
 * resume it (each expired or gone) and no pod of it stands, the record turns
 * Expired, the stored outcome for a new Sandbox of the scope and key, as a
 * release at expiry writes it; ownerless, it outlives the Sandboxes. Returns
 * 0, a delay, or -1. */
static int expire_released(struct sbx_controller *c, struct sbx_view *v)
{
	const char *pod_name = jstr(v->status, "podName");
	cJSON *recs = v->key && pod_name ? sbx_rec_cached(c, v) : NULL;
	const cJSON *o, *obj = NULL;
	struct sbx_claimrec rec;
	cJSON_ArrayForEach(o, recs)
	{
		char why[128];
		if (!obj && sbx_claimrec_parse(o, v->ns, c->seal_keys, &rec, why, sizeof why) == 0 &&
		    rec.state == SBX_CLAIM_SUSPENDED && !strcmp(rec.pod_name, pod_name))
			obj = o;
	}
	int r = 0;
	if (obj) {
		cJSON *refs = sbx_rec_refs(obj), *pod = NULL;
		struct holders h;
		count_holders(c, v, H_EXPIRED, refs, &h);
		if (!h.active && !h.suspended) {
			/* A Sandbox that joined the generation made its pod again:
			 * the pod, not the record, says what the generation is. */
			if (sbx_rc_get_pod(c, v->ns, pod_name, &pod) < 0)
				r = -1;
			else if (!pod || meta_str(pod, "deletionTimestamp"))
				r = sbx_rec_put_expired(c, v, &rec, h.expired_name[0] ? h.expired_name : v->name);
		}
		cJSON_Delete(pod);
		cJSON_Delete(h.refs);
		cJSON_Delete(refs);
	}
	cJSON_Delete(recs);
	return r;
}

int sbx_lc_expire(struct sbx_controller *c, struct sbx_view *v)
{
	char at[32], msg[512];
	ktime_format_rfc3339(v->lc.has_shutdown ? v->lc.shutdown : v->now, at);
	int bound = bound_here(v);
	const char *phase = jstr(v->status, "phase");
	int already = phase && !strcmp(phase, "Expired");
	if (!already) {
		/* The status is the commit point: written against the version the
		 * decision saw, so an extension made meanwhile wins. */
		snprintf(msg, sizeof msg, "the Sandbox expired at %s (spec.lifecycle.shutdownTime)%s%s", at,
			 bound ? "; its use of pod " : "", bound ? jstr(v->status, "podName") : "");
		struct sbx_status_in in;
		if (bound) {
			in = unbound_holding(v, "Expired", "Expired", msg);
		} else {
			in = (struct sbx_status_in){ .phase = "Expired",
						     .scope_digest = v->scope.digest,
						     .fingerprint = v->scope.fingerprint,
						     .generation = v->generation,
						     .bound_reason = "Expired",
						     .bound_message = msg,
						     .ready_reason = "Expired",
						     .ready_message = msg };
		}
		int w = sbx_rc_write_status_guarded(c, v, &in);
		if (w < 0 || w == REQUEUE_BUSY_MS)
			return w;
		sbx_lc_resume_forget(c, v->uid);
		if (once(c, v, "expired", NULL)) {
			obs_metric_add(sbx_m.expirations, NULL, 1);
			sbx_rc_event(c, v, "Normal", "SandboxExpired", msg);
			log_kv(LOG_INFO, "sandbox expired", "sandbox", v->name, "namespace", v->ns, "shutdownTime", at);
		}
	}
	int r = bound ? release(c, v, H_EXPIRED) : release_unreported(c, v, H_EXPIRED);
	if (r == 0 && bound)
		r = expire_released(c, v);
	if (r)
		return r;
	if (bound)
		sbx_quota_release_unused(c, v);
	else
		sbx_quota_release_pending(c, v); /* a slot taken before its pod existed */
	if (v->lc.delete_policy) {
		char path[600];
		sbx_rc_path(path, sizeof path, v);
		fault_point("before-sandbox-delete");
		return sbx_rc_delete(c, path, v->uid, NULL);
	}
	return 0;
}

int sbx_lc_suspend(struct sbx_controller *c, struct sbx_view *v, int bound)
{
	const char *msg = bound ? "suspended (spec.lifecycle.suspend): the pod is released once every Sandbox bound to it "
				  "is suspended, expired or gone; the workspace stays"
				: "suspended (spec.lifecycle.suspend) before it was bound: no pod until it is resumed";
	struct sbx_status_in in;
	if (bound) {
		in = not_holding(v, "Suspended", "Suspended", msg);
	} else {
		in = (struct sbx_status_in){ .phase = "Suspended",
					     .scope_digest = v->scope.digest,
					     .fingerprint = v->scope.fingerprint,
					     .generation = v->generation,
					     .bound_reason = "Waiting",
					     .bound_message = msg,
					     .ready_reason = "Suspended",
					     .ready_message = msg };
	}
	/* The latest generation seen suspended, also when it was Suspended
	 * already (a resume refused, then suspended again): a record issued
	 * for the refused run authorizes no later one. */
	in.suspended_generation = v->generation;
	int w = sbx_rc_write_status_guarded(c, v, &in);
	if (w < 0 || w == REQUEUE_BUSY_MS)
		return w;
	sbx_lc_resume_forget(c, v->uid);
	if (!bound) {
		int r = release_unreported(c, v, H_SUSPENDED);
		if (r)
			return r;
		sbx_quota_release_pending(c, v); /* a slot taken before its pod existed */
	}
	if (once(c, v, "suspended", "resumed")) {
		obs_metric_add(sbx_m.suspensions, NULL, 1);
		sbx_rc_event(c, v, "Normal", "SandboxSuspended", msg);
		log_kv(LOG_INFO, "sandbox suspended", "sandbox", v->name, "namespace", v->ns);
	}
	if (!bound)
		return 0;
	int r = release(c, v, H_SUSPENDED);
	if (r == 0)
		sbx_quota_release_unused(c, v); /* a resume's slot whose pod was never made */
	return r;
}

int sbx_lc_terminating(struct sbx_controller *c, struct sbx_view *v)
{
	char msg[256];
	if (!cJSON_IsObject(v->spec) || sbx_scope_compute(v->ns, v->uid, v->spec, &v->scope, msg, sizeof msg) < 0)
		return 0; /* no scope: it never had a pod */
	/* Nothing is written to v: its status keeps naming the pod, which a
	 * release retried after a 409 reads. A pod another Sandbox still holds
	 * is looked at again when that changes: the pod's events (the garbage
	 * collector dropping a gone holder's reference) requeue its owners. */
	int r = bound_here(v) ? release(c, v, H_GONE) : release_unreported(c, v, H_GONE);
	if (r)
		return r;
	/* A slot v took before its pod existed is v's until then: the garbage
	 * collector would take it with v, but a finalizer may hold v for ever. */
	sbx_quota_release_pending(c, v);
	sbx_lc_resume_forget(c, v->uid);
	return 0;
}

/* ---- resume latency: from the resume seen to Ready, per Sandbox uid ---- */

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The resume of uid was seen now (the first time counts; at most 100,000
 * are timed at once). */
static void resume_started(struct sbx_controller *c, const char *uid)
{
	if (!c->resume_starts)
		return;
	strmap_lock(c->resume_starts);
	if (!strmap_get(c->resume_starts, uid) && strmap_count(c->resume_starts) < 100000) {
		double *at = strmap_put(c->resume_starts, uid, NULL);
		if (at)
			*at = mono_s();
	}
	strmap_unlock(c->resume_starts);
}

void sbx_lc_ready(struct sbx_controller *c, const struct sbx_view *v)
{
	if (!c->resume_starts)
		return;
	strmap_lock(c->resume_starts);
	double *at = strmap_get(c->resume_starts, v->uid);
	if (at) {
		obs_metric_observe(sbx_m.resume_seconds, NULL, mono_s() - *at);
		strmap_del(c->resume_starts, v->uid);
	}
	strmap_unlock(c->resume_starts);
}

void sbx_lc_resume_forget(struct sbx_controller *c, const char *uid)
{
	if (!c->resume_starts || !uid)
		return;
	strmap_lock(c->resume_starts);
	strmap_del(c->resume_starts, uid);
	strmap_unlock(c->resume_starts);
}

static int webhook_in_force_for(struct sbx_controller *c, struct sbx_view *v, const char *operation, time_t made,
				const char *what, const char *reason, int *r);

/* Whether the product's mutating webhook was in force for operation on v's
 * namespace at `made` (reconcile/inforce.h): 1 when it was. Otherwise 0, with
 * Bound=False/OwnerNotAuthorized reported and *r the reconcile's result: 0
 * (done: the Sandbox is looked at again when it changes), a delay while the
 * configuration's cache has not synced, or -1 when the report failed. */
static int webhook_in_force(struct sbx_controller *c, struct sbx_view *v, const char *operation, time_t made, int *r)
{
	char what[600];
	snprintf(what, sizeof what, "workspace owner %s", v->owner ? v->owner : "");
	return webhook_in_force_for(c, v, operation, made, what, "OwnerNotAuthorized", r);
}

/* webhook_in_force for what (the owner's or the profiles' authorization),
 * reporting reason. */
static int webhook_in_force_for(struct sbx_controller *c, struct sbx_view *v, const char *operation, time_t made,
				const char *what, const char *reason, int *r)
{
	char why[512], msg[1400];
	if (!c->webhooks || !informer_wait_synced(c->webhooks, 0)) {
		snprintf(msg, sizeof msg, "%s: waiting to read the MutatingWebhookConfiguration %s", what,
			 c->webhook_config);
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
		 "%s: the admission webhook was not in force for this Sandbox (%s), so its authorization cannot be "
		 "trusted; no pod is created",
		 what, why);
	*r = refuse_run(c, v, "Rejected", reason, msg, reason);
	return 0;
}

/* The generation v was last suspended at (status.suspendedGeneration; 0:
 * never): a record of that run or an earlier one authorizes no later run. */
static long long suspended_generation(const struct sbx_view *v)
{
	const cJSON *sg = jobj(v->status, "suspendedGeneration");
	return cJSON_IsNumber(sg) ? (long long)sg->valuedouble : 0;
}

/* 1 when record rec (not yet verified) is of a run after the first: a
 * resume's, which names its resumer (sandbox.dev/resumed-by and
 * resumed-identity) rather than the creator. */
static int record_of_resume(const char *rec)
{
	return rec && (!strncmp(rec, "v2.", 3) || !strncmp(rec, "v3.", 3)) && strchr(rec + 3, '.') &&
	       strncmp(strchr(rec + 3, '.'), ".1.", 3);
}

int sbx_lc_owner_authorized(struct sbx_controller *c, struct sbx_view *v, int check_creation, int *r)
{
	if (!v->owner || c->cfg->owner_authz != SBX_OWNER_AUTHZ_ACCESS_REVIEW)
		return 1;
	const cJSON *ann = jobj(jobj(v->obj, "metadata"), "annotations");
	const char *rec = jstr(ann, SBX_ANN_OWNER_AUTHZ);
	long long suspended = suspended_generation(v);
	int resumed = record_of_resume(rec);
	struct sbx_authz_subject s = { .ns = v->ns, .name = v->name, .owner = v->owner, .fingerprint = v->scope.fingerprint, .username = jstr(ann, resumed ? SBX_ANN_RESUMED_BY : SBX_ANN_REQUESTED_BY), .identity = jstr(ann, resumed ? SBX_ANN_RESUMED_IDENTITY : SBX_ANN_AUTHZ_IDENTITY) };
	struct sbx_authz_info info = { 0 };
	enum sbx_authz_check ac = sbx_authz_verify((const unsigned char *const *)c->seal_keys->key, c->seal_keys->len,
						   c->seal_keys->n, &s, v->created, rec, &info);
	char msg[640];
	if (ac == SBX_AUTHZ_OK && info.run <= suspended) {
		snprintf(msg, sizeof msg,
			 "workspace owner %s: the owner authorization is of an earlier run (generation %lld; the Sandbox "
			 "was suspended at generation %lld): resume it with the admission webhook in force, as an "
			 "identity allowed to use this owner; no pod is created",
			 v->owner, info.run, suspended);
		*r = refuse_run(c, v, "Rejected", "OwnerNotAuthorized", msg, "OwnerNotAuthorized");
		return 0;
	}
	if (ac != SBX_AUTHZ_OK) {
		snprintf(msg, sizeof msg,
			 "workspace owner %s: %s; no pod is created (create or resume the Sandbox with the admission "
			 "webhook installed, as an identity allowed to use this owner)",
			 v->owner, sbx_authz_str(ac));
		*r = refuse_run(c, v, "Rejected", "OwnerNotAuthorized", msg, "OwnerNotAuthorized");
		return 0;
	}
	v->authz_issued = info.issued;
	v->authz_run = info.run;
	v->authz_identity = info.has_identity;
	/* A record counts only when the API server's admission call made it:
	 * anyone who reaches the webhook port can have one made, but only a
	 * Sandbox the webhook saw created (or resumed) carries one it let
	 * through. */
	if (info.run == 1)
		return !check_creation || webhook_in_force(c, v, "CREATE", v->created, r);
	return webhook_in_force(c, v, "UPDATE", info.issued, r);
}

/* Who started v's run, as the record verified for it names them: the
 * owner's (of_profiles 0) or the profiles' (1). */
struct run_starter {
	const char *who;      /* the username: sandbox.dev/requested-by, or resumed-by */
	const char *identity; /* the whole identity the record covers; NULL: none (an earlier version's) */
	time_t issued;	      /* when the record was made; 0: none verified */
	int resumed;	      /* the record is a resume's */
};

static struct run_starter run_starter(const struct sbx_view *v, int of_profiles)
{
	const cJSON *ann = jobj(jobj(v->obj, "metadata"), "annotations");
	int resumed = (of_profiles ? v->net_run : v->authz_run) > 1;
	struct run_starter s = {
		.who = jstr(ann, resumed ? SBX_ANN_RESUMED_BY : SBX_ANN_REQUESTED_BY),
		.identity = (of_profiles ? v->net_identity : v->authz_identity)
				? jstr(ann, resumed ? SBX_ANN_RESUMED_IDENTITY : SBX_ANN_AUTHZ_IDENTITY)
				: NULL,
		.issued = of_profiles ? v->net_issued : v->authz_issued,
		.resumed = resumed,
	};
	return s;
}

/* Whether the identity that started v's run may still use its owner
 * (sbx_lc_still_allowed). */
static int owner_still_allowed(struct sbx_controller *c, const struct sbx_view *v, char *msg, size_t msglen)
{
	struct run_starter st = run_starter(v, 0);
	if (!v->owner || c->cfg->owner_authz != SBX_OWNER_AUTHZ_ACCESS_REVIEW || !st.issued ||
	    v->now - st.issued <= SBX_AUTHZ_RECHECK_S)
		return 1;
	char why[256] = "", uq[160];
	int may = sbx_reauthz_check(c->reauthz, c->kc, st.identity, st.who, v->ns, v->owner, 0, why, sizeof why);
	snprintf(uq, sizeof uq, "%s", st.who ? st.who : "");
	if (may < 0)
		snprintf(msg, msglen,
			 "workspace owner %s: cannot check whether %s, who %s this Sandbox, may still use the owner "
			 "(%s); no pod is made meanwhile",
			 v->owner, uq, st.resumed ? "resumed" : "created", why);
	else if (!may)
		snprintf(msg, msglen,
			 "workspace owner %s: %s, who %s this Sandbox, may no longer use the owner (missing permission "
			 "\"use\" on workspaces.sandbox.dev \"%s\"%s%s)%s; no pod is made until they may again, or "
			 "delete the Sandbox",
			 v->owner, uq, st.resumed ? "resumed" : "created", v->owner, why[0] ? ": " : "", why,
			 st.identity ? ""
				     : " (asked as the username alone: this Sandbox was admitted by an earlier "
				       "version, which recorded no groups; create it again to record them)");
	return may;
}

/* Whether the identity that started v's run may still use each allow
 * profile v names (sbx_lc_still_allowed): for a creation, the creator the
 * profiles' record names; for a resume, the resumer its record names (the
 * owner's, or without an owner record the profiles' own; a resume recorded
 * by an earlier version names none: not asked). */
static int profiles_still_allowed(struct sbx_controller *c, const struct sbx_view *v, int resume, char *msg,
				  size_t msglen)
{
	const char *names[SBX_PROFILES_MAX];
	size_t n = 0;
	char why[256] = "", uq[160];
	int of_profiles = !resume || v->net_run > 1;
	struct run_starter st = run_starter(v, of_profiles);
	if (!st.issued || (!of_profiles && !st.resumed) || v->now - st.issued <= SBX_AUTHZ_RECHECK_S ||
	    sbx_spec_profiles(v->spec, names, &n, why, sizeof why) < 0 || !n)
		return 1;
	snprintf(uq, sizeof uq, "%s", st.who ? st.who : "");
	for (size_t i = 0; i < n; i++) {
		why[0] = '\0';
		int may = sbx_reauthz_check_profile(c->reauthz, c->kc, st.identity, st.who, names[i], 0, why, sizeof why);
		if (may < 0)
			snprintf(msg, msglen,
				 "network profile %s: cannot check whether %s, who %s this Sandbox, may still use it (%s); "
				 "no pod is made meanwhile",
				 names[i], uq, st.resumed ? "resumed" : "created", why);
		else if (!may)
			snprintf(msg, msglen,
				 "network profile %s: %s, who %s this Sandbox, may no longer use it (missing permission "
				 "\"use\" on sandboxnetworkprofiles.sandbox.dev \"%s\"%s%s); no pod is made until they may "
				 "again, or delete the Sandbox",
				 names[i], uq, st.resumed ? "resumed" : "created", names[i], why[0] ? ": " : "", why);
		if (may != 1)
			return may;
	}
	return 1;
}

int sbx_lc_still_allowed(struct sbx_controller *c, const struct sbx_view *v, int resume, const char **reason,
			 char *msg, size_t msglen)
{
	msg[0] = '\0';
	*reason = "OwnerNotAuthorized";
	int may = owner_still_allowed(c, v, msg, msglen);
	if (may != 1)
		return may;
	*reason = "NetworkProfileNotAuthorized";
	return profiles_still_allowed(c, v, resume, msg, msglen);
}

int sbx_lc_claim_allowed(struct sbx_controller *c, const struct sbx_view *v, int *r)
{
	char msg[900];
	const char *reason;
	int may = sbx_lc_still_allowed(c, v, 0, &reason, msg, sizeof msg);
	if (may > 0)
		return 1;
	if (may < 0) {
		log_kv(LOG_WARN, "cannot check the requester's rights", "sandbox", v->name, "namespace", v->ns, "error",
		       msg);
		*r = -1;
		return 0;
	}
	/* No pod for now: a slot v took before it was refused (its create
	 * failed, or the controller stopped) is not held meanwhile, nor its
	 * place in the line (docs/api.md). */
	sbx_quota_release_pending(c, v);
	*r = sbx_rc_report_unbound(c, v, "Pending", reason, msg, reason) < 0 ? -1 : REQUEUE_REVOKED_MS;
	return 0;
}

int sbx_lc_network_authorized(struct sbx_controller *c, struct sbx_view *v, int check_creation, int *r)
{
	const char *names[SBX_PROFILES_MAX];
	size_t n = 0;
	char joined[SBX_PROFILES_JOINED_MAX], hash[17], subject[SBX_PROFILES_JOINED_MAX + 32], msg[1400];
	if (sbx_spec_profiles(v->spec, names, &n, msg, sizeof msg) < 0 || !n)
		return 1; /* none (an invalid spec was rejected before) */
	if (sbx_profiles_set(names, n, joined, hash) < 0)
		return 1;
	const cJSON *ann = jobj(jobj(v->obj, "metadata"), "annotations");
	const char *rec = jstr(ann, SBX_ANN_NET_AUTHZ);
	/* A resume is recorded here when no owner record covers it
	 * (webhook/sandbox_admission.c, mutate_resume). */
	int by_owner = sbx_owner_recorded(v->owner, c->cfg->owner_authz), resumed = record_of_resume(rec);
	snprintf(subject, sizeof subject, SBX_NETPROFILE_AUTHZ_PREFIX "%s", joined);
	struct sbx_authz_subject s = { .ns = v->ns, .name = v->name, .owner = subject, .fingerprint = v->scope.fingerprint, .username = jstr(ann, resumed ? SBX_ANN_RESUMED_BY : SBX_ANN_REQUESTED_BY), .identity = jstr(ann, resumed ? SBX_ANN_RESUMED_IDENTITY : SBX_ANN_AUTHZ_IDENTITY) };
	struct sbx_authz_info info = { 0 };
	enum sbx_authz_check ac = sbx_authz_verify((const unsigned char *const *)c->seal_keys->key, c->seal_keys->len,
						   c->seal_keys->n, &s, v->created, rec, &info);
	if (ac == SBX_AUTHZ_OK && info.run != 1 && by_owner)
		ac = SBX_AUTHZ_MISMATCH;
	v->net_issued = ac == SBX_AUTHZ_OK ? info.issued : 0;
	v->net_run = ac == SBX_AUTHZ_OK ? info.run : 0;
	v->net_identity = info.has_identity;
	long long suspended = suspended_generation(v);
	if (ac == SBX_AUTHZ_OK && !by_owner && info.run <= suspended) {
		snprintf(msg, sizeof msg,
			 "network profiles %s: the authorization to use them is of an earlier run (generation %lld; the "
			 "Sandbox was suspended at generation %lld): resume it with the admission webhook in force, as "
			 "an identity allowed to use these profiles; no pod is created",
			 joined, info.run, suspended);
		*r = refuse_run(c, v, "Rejected", "NetworkProfileNotAuthorized", msg,
				"NetworkProfileNotAuthorized");
		return 0;
	}
	if (ac != SBX_AUTHZ_OK) {
		snprintf(msg, sizeof msg,
			 "network profiles %s: %s; no pod is created (create the Sandbox with the admission webhook "
			 "installed, as an identity allowed to use these profiles)",
			 joined,
			 ac == SBX_AUTHZ_MISSING ? "no record of the authorization to use them"
						 : "the record of the authorization to use them does not verify");
		*r = refuse_run(c, v, "Rejected", "NetworkProfileNotAuthorized", msg,
				"NetworkProfileNotAuthorized");
		return 0;
	}
	/* As for an owner: only a record the API server's admission call made
	 * counts (with ownerAuthorization namespace the configuration is not
	 * watched: docs/operations.md). */
	snprintf(msg, sizeof msg, "network profiles %s", joined);
	if (c->webhooks && (info.run == 1 ? check_creation : 1) &&
	    !webhook_in_force_for(c, v, info.run == 1 ? "CREATE" : "UPDATE", info.run == 1 ? v->created : info.issued,
				  msg, "NetworkProfileNotAuthorized", r))
		return 0;
	/* Each must still exist: one deleted since admission grants nothing,
	 * and the Sandbox waits (looked at again) rather than run without it. */
	if (!c->profiles || !informer_wait_synced(c->profiles, 0)) {
		*r = REQUEUE_WAIT_MS;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		cJSON *p = informer_get(c->profiles, NULL, names[i]);
		cJSON_Delete(p);
		if (p)
			continue;
		snprintf(msg, sizeof msg,
			 "network profile %s does not exist (deleted after this Sandbox was admitted); no pod is created "
			 "until it is defined again",
			 names[i]);
		/* It waits out of its quota's line (quota.c, wants_slot), so it
		 * holds no slot meanwhile either. */
		sbx_quota_release_pending(c, v);
		*r = sbx_rc_report_unbound(c, v, "Pending", "NetworkProfileNotFound", msg, "NetworkProfileNotFound") < 0
			 ? -1
			 : REQUEUE_PROFILE_MS;
		return 0;
	}
	return 1;
}

int sbx_lc_resume(struct sbx_controller *c, struct sbx_view *v)
{
	int r = 0;
	if (!sbx_lc_owner_authorized(c, v, 0, &r) || !sbx_lc_network_authorized(c, v, 0, &r))
		return r;
	const char *pod_name = jstr(v->status, "podName"), *claimed = jstr(v->status, "claimedAt");
	cJSON *pod = NULL;
	if (sbx_rc_get_pod(c, v->ns, pod_name, &pod) < 0)
		return -1;
	struct kube_error err;
	int created = 0;
	if (!pod) {
		char claim[80], qmsg[700];
		if (claim_name_for(c, v, pod_name, claim, sizeof claim) < 0)
			return REQUEUE_WAIT_MS; /* its record is not in the cache yet */
		const char *reason;
		int may = sbx_lc_still_allowed(c, v, 1, &reason, qmsg, sizeof qmsg);
		if (may < 0) {
			log_kv(LOG_WARN, "cannot check the resumer's rights", "sandbox", v->name, "namespace", v->ns,
			       "error", qmsg);
			return -1;
		}
		if (!may) {
			sbx_quota_release_pending(c, v); /* as sbx_lc_claim_allowed */
			struct sbx_status_in in = unbound_holding(v, "Suspended", reason, qmsg);
			int w = sbx_rc_write_status_guarded(c, v, &in);
			if (w == 1)
				sbx_rc_event(c, v, "Warning", reason, qmsg);
			return w < 0 ? -1 : w == REQUEUE_BUSY_MS ? w
								 : REQUEUE_REVOKED_MS;
		}
		if (!sbx_rc_workspace_ready(c, v, &r))
			return r;
		/* A resume counts: the generation needs one of its owner's quota
		 * slots again (it waits for one, whatever the quota's mode). */
		enum sbx_quota_verdict qv = sbx_quota_admit(c, v, claim, 1, qmsg, sizeof qmsg);
		if (qv == SBX_QUOTA_ERROR)
			return -1;
		if (qv != SBX_QUOTA_ADMIT) {
			struct sbx_status_in in = unbound_holding(v, "Suspended", "QuotaWaiting", qmsg);
			int w = sbx_rc_write_status_guarded(c, v, &in);
			return w < 0 ? -1 : w == REQUEUE_BUSY_MS ? w
								 : REQUEUE_QUOTA_MS;
		}
		resume_started(c, v->uid);
		enum kube_err e = sbx_rc_create_pod(c, v, pod_name, claim, claimed, &pod, &err);
		if (e == KUBE_OK) {
			created = 1;
		} else if (e == KUBE_ERR_ALREADY_EXISTS || kube_err_retriable(e)) {
			if (sbx_rc_get_pod(c, v->ns, pod_name, &pod) < 0 || !pod)
				return e == KUBE_ERR_ALREADY_EXISTS ? REQUEUE_BUSY_MS : -1;
		} else {
			char msg[700];
			snprintf(msg, sizeof msg, "re-creating pod %s for the resume failed (%s): %s; retrying", pod_name,
				 kube_err_str(e), err.message);
			sbx_rc_report_unbound(c, v, "Pending", "Waiting", msg, NULL);
			v->retry_after_ms = (long)err.retry_after_s * 1000;
			return -1;
		}
	}
	int delay = 0;
	if (created) {
		/* Its binding stays what it was (a resume by an adopter re-creates
		 * the pod, but did not claim it). */
		r = sbx_rc_report_bound(c, v, pod, sbx_rc_binding_how(jstr(v->status, "binding"))) < 0 ? -1 : 0;
		sbx_quota_bound(c, v, sbx_rc_claim_of(pod), pod);
	} else {
		/* Someone's pod stands under the name (another replica's resume,
		 * another Sandbox's): verified and adopted like any other. */
		enum sbx_examine x = sbx_rc_examine(c, v, pod, &delay);
		r = x == EX_DONE ? delay : x == EX_RETRY_SOON ? REQUEUE_BUSY_MS
							      : -1;
		if (x == EX_NEXT_GENERATION)
			r = 0; /* the key expired meanwhile: nothing to resume into */
	}
	cJSON_Delete(pod);
	if (r >= 0 && once(c, v, "resumed", "suspended")) {
		obs_metric_add(sbx_m.resumes, NULL, 1);
		sbx_rc_event(c, v, "Normal", "SandboxResumed", "resumed: its pod runs again under the same name");
		log_kv(LOG_INFO, "sandbox resumed", "sandbox", v->name, "namespace", v->ns, "pod", pod_name);
	}
	return r;
}

/* The verified record of v's digest whose pod is pod_name, of a released
 * state only (released) or any: 1 with *out, or 0. */
static int record_of_pod(struct sbx_controller *c, const struct sbx_view *v, const char *pod_name, int released,
			 struct sbx_claimrec *out)
{
	cJSON *recs = pod_name ? sbx_rec_cached(c, v) : NULL;
	const cJSON *o;
	int found = 0;
	cJSON_ArrayForEach(o, recs)
	{
		char why[128];
		if (!found && sbx_claimrec_parse(o, v->ns, c->seal_keys, out, why, sizeof why) == 0 &&
		    !strcmp(out->pod_name, pod_name) && (!released || out->state != SBX_CLAIM_BOUND))
			found = 1;
	}
	cJSON_Delete(recs);
	return found;
}

int sbx_lc_released(struct sbx_controller *c, const struct sbx_view *v, const char *pod_name, struct sbx_claimrec *rec)
{
	struct sbx_claimrec tmp;
	return record_of_pod(c, v, pod_name, 1, rec ? rec : &tmp);
}

/* The claim name of v's pod pod_name: its own name for a cold pod, else the
 * name of its generation's record (a warm pod bound to the scope), else for
 * a Sandbox without a key its only generation. 0, or -1 (not known yet). */
static int claim_name_for(struct sbx_controller *c, const struct sbx_view *v, const char *pod_name, char *out,
			  size_t n)
{
	struct sbx_claimrec rec;
	if (sbx_claim_generation(pod_name, v->scope.digest) >= 0)
		snprintf(out, n, "%s", pod_name);
	else if (record_of_pod(c, v, pod_name, 0, &rec))
		snprintf(out, n, "%s", rec.name);
	else if (!v->key)
		sbx_pod_name(&v->scope, 0, out, n);
	else
		return -1;
	return 0;
}

int sbx_lc_pod_expired(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, char *expired, size_t n)
{
	struct holders h;
	count_holders(c, v, H_ACTIVE, owner_refs(pod), &h); /* v is new: not among its owners */
	int gone = !h.active && !h.suspended && h.expired;
	if (gone)
		snprintf(expired, n, "%s", h.expired_name);
	cJSON_Delete(h.refs);
	return gone;
}

int sbx_lc_report_expired_key(struct sbx_controller *c, struct sbx_view *v, const char *holder, const char *pod_name,
			      const char *key_expires_at)
{
	char msg[700];
	snprintf(msg, sizeof msg,
		 "the sandbox of this scope and key (pod %s) expired with Sandbox %s; no new pod until the key's lifetime "
		 "ends%s%s (a new key is a new intent)",
		 pod_name, holder && *holder ? holder : "(deleted)", key_expires_at ? " at " : "",
		 key_expires_at ? key_expires_at : "");
	struct sbx_status_in in = { .phase = "Expired",
				    .scope_digest = v->scope.digest,
				    .fingerprint = v->scope.fingerprint,
				    .key_expires_at = key_expires_at,
				    .generation = v->generation,
				    .bound_reason = "Expired",
				    .bound_message = msg,
				    .ready_reason = "Expired",
				    .ready_message = msg };
	if (sbx_rc_write_status(c, v, &in) < 0)
		return -1;
	if (once(c, v, "expired", NULL)) {
		sbx_rc_event(c, v, "Normal", "SandboxExpired", msg);
		log_kv(LOG_INFO, "late retry of an expired key", "sandbox", v->name, "namespace", v->ns, "pod", pod_name);
	}
	return 0;
}

enum sbx_examine sbx_lc_claim_record(struct sbx_controller *c, struct sbx_view *v, const cJSON *obj, int *delay)
{
	struct sbx_claimrec rec;
	char why[128];
	time_t claimed;
	*delay = 0;
	if (sbx_claimrec_parse(obj, v->ns, c->seal_keys, &rec, why, sizeof why) < 0 ||
	    ktime_parse_rfc3339(rec.claimed_at, &claimed) < 0)
		return EX_RETRY;
	if (claimed + sbx_rc_key_lifetime(c) <= v->created)
		return EX_NEXT_GENERATION; /* the key expired: a new intent */
	if (strcmp(rec.fingerprint, v->scope.fingerprint)) {
		char msg[768];
		snprintf(msg, sizeof msg,
			 "idempotency key is held by the generation of pod %s (Sandbox %s) with a different spec; use "
			 "another key or the same spec",
			 rec.pod_name, rec.sandbox);
		return sbx_rc_report_unbound(c, v, "Rejected", "IdempotencyKeyConflict", msg, "IdempotencyKeyConflict") < 0
			   ? EX_RETRY
			   : EX_DONE;
	}
	if (rec.state == SBX_CLAIM_EXPIRED)
		return sbx_lc_report_expired_key(c, v, rec.sandbox, rec.pod_name, rec.key_expires_at) < 0 ? EX_RETRY
													  : EX_DONE;
	if (rec.state == SBX_CLAIM_REJECTED) {
		/* The stored outcome of a quota refusal (mode Reject): never a pod
		 * for this intent while the key lives. */
		char msg[768];
		if (strcmp(rec.sandbox, v->name) || sbx_quota_refusal_message(c, v, msg, sizeof msg) < 0)
			snprintf(msg, sizeof msg,
				 "the intent of this scope and key was refused by its owner's quota with Sandbox %s (mode "
				 "Reject): no sandbox until the key's lifetime ends at %s (a new key is a new intent)",
				 rec.sandbox, rec.key_expires_at);
		sbx_quota_release_pending(c, v);
		return sbx_rc_report_unbound(c, v, "Rejected", "QuotaExceeded", msg, "QuotaExceeded") < 0 ? EX_RETRY : EX_DONE;
	}
	cJSON *pod = NULL;
	if (rec.state == SBX_CLAIM_BOUND) {
		/* The generation is claimed and its pod not seen. A warm pod: the
		 * take is completed or the record pointed elsewhere (warm.h). The
		 * cold name: the pod is read live; missing, the caller creates it. */
		if (strcmp(rec.pod_name, rec.name)) {
			int r = 0;
			if (!sbx_warm_resume_claim(c, v, obj, rec.name, sbx_lc_claim_allowed, &r))
				return EX_CREATE;
			*delay = r > 0 ? r : 0;
			return r < 0 ? EX_RETRY : EX_DONE;
		}
		if (sbx_rc_get_pod(c, v->ns, rec.pod_name, &pod) < 0)
			return EX_RETRY;
		if (!pod)
			return EX_CREATE;
		enum sbx_examine x = sbx_rc_examine(c, v, pod, delay);
		cJSON_Delete(pod);
		return x;
	}
	/* Suspended: v joins the generation and, not suspended itself, resumes
	 * it: while its requester may still use the owner (the pod is made for
	 * v's request, as a new generation's), once its owner's folders are
	 * prepared, and within its owner's quota (a resume counts). */
	int wr = 0;
	if (!sbx_lc_claim_allowed(c, v, &wr) || !sbx_rc_workspace_ready(c, v, &wr)) {
		*delay = wr > 0 ? wr : 0;
		return wr < 0 ? EX_RETRY : EX_DONE;
	}
	int qr = 0;
	if (!sbx_quota_wait_for_slot(c, v, rec.name, &qr)) {
		*delay = qr > 0 ? qr : 0;
		return qr < 0 ? EX_RETRY : EX_DONE;
	}
	struct kube_error err;
	enum kube_err e = sbx_rc_create_pod(c, v, rec.pod_name, rec.name, rec.claimed_at, &pod, &err);
	if (e == KUBE_OK) {
		resume_started(c, v->uid);
		sbx_quota_bound(c, v, rec.name, pod);
		int rr = sbx_rc_report_bound(c, v, pod, 1);
		cJSON_Delete(pod);
		if (rr < 0)
			return EX_RETRY;
		if (once(c, v, "resumed", "suspended")) {
			obs_metric_add(sbx_m.resumes, NULL, 1);
			sbx_rc_event(c, v, "Normal", "SandboxResumed",
				     "joined a suspended sandbox of its scope and key and resumed it under the same name");
		}
		return EX_DONE;
	}
	if (e != KUBE_ERR_ALREADY_EXISTS && !kube_err_retriable(e)) {
		char msg[1024];
		snprintf(msg, sizeof msg, "re-creating pod %s of the suspended generation failed (%s): %s; retrying",
			 rec.pod_name, kube_err_str(e), err.message);
		sbx_rc_report_unbound(c, v, "Pending", "Waiting", msg, NULL);
		return EX_RETRY;
	}
	if (sbx_rc_get_pod(c, v->ns, rec.pod_name, &pod) < 0 || !pod)
		return EX_RETRY_SOON;
	enum sbx_examine x = sbx_rc_examine(c, v, pod, delay);
	cJSON_Delete(pod);
	return x;
}

/* ---- sandbox pods no Sandbox holds ---- */

/* Puts refs (the Sandboxes bound to pod, in the shape count_holders
 * builds) back among pod's owner references, non-controller as an
 * adopter's, guarded by the pod's uid and resourceVersion: a pod changed
 * meanwhile (a joiner's reference, a delete) is looked at again. 0,
 * REQUEUE_BUSY_MS, or -1. */
static int restore_owners(struct sbx_controller *c, const char *ns, const cJSON *pod, cJSON *refs)
{
	cJSON *r;
	cJSON_ArrayForEach(r, refs)
	{
		cJSON_AddFalseToObject(r, "controller");
		cJSON_AddTrueToObject(r, "blockOwnerDeletion");
	}
	cJSON *patch = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(patch, "metadata");
	cJSON_AddStringToObject(m, "uid", meta_str(pod, "uid"));
	cJSON_AddStringToObject(m, "resourceVersion", meta_str(pod, "resourceVersion"));
	cJSON_AddItemToObject(m, "ownerReferences", cJSON_Duplicate(refs, 1));
	char *body = cJSON_PrintUnformatted(patch);
	cJSON_Delete(patch);
	char path[600];
	sbx_rc_pod_path(path, sizeof path, ns, meta_str(pod, "name"));
	struct kube_error err;
	enum kube_err e =
	    kube_request(c->kc, "PATCH", path, NULL, body, "application/strategic-merge-patch+json", NULL, &err);
	free(body);
	if (e == KUBE_OK)
		return 0;
	if (e == KUBE_ERR_CONFLICT || e == KUBE_ERR_NOT_FOUND)
		return REQUEUE_BUSY_MS;
	log_kv(LOG_WARN, "restoring a sandbox pod's owner references failed", "namespace", ns, "pod",
	       meta_str(pod, "name"), "error", err.message);
	return -1;
}

int sbx_lc_collect_orphan(struct sbx_controller *c, const char *ns, const char *name)
{
	if (!c->sandboxes || !informer_wait_synced(c->sandboxes, 0))
		return REQUEUE_WAIT_MS; /* who is bound to it cannot be told yet */
	cJSON *pod = NULL;
	if (sbx_rc_get_pod(c, ns, name, &pod) < 0)
		return -1;
	const char *uid = meta_str(pod, "uid"), *rv = meta_str(pod, "resourceVersion");
	const char *digest = jstr(jobj(jobj(pod, "metadata"), "labels"), SBX_LABEL_DIGEST);
	if (!pod || !uid || !rv || !sbx_pod_orphaned(pod, c->seal_keys)) {
		cJSON_Delete(pod);
		return 0; /* gone, going, held again, or not the controller's */
	}
	/* A claim of its scope in flight here may have just made or taken it
	 * and not yet said so in its status: looked at once that is done. */
	if (c->inflight && sbx_strset_has(c->inflight, digest)) {
		cJSON_Delete(pod);
		return REQUEUE_WAIT_MS;
	}
	/* The Sandboxes bound to this very pod (status podName and podUID: one
	 * bound to an earlier pod of the name holds nothing of this one), by
	 * the cache's index of scope digests. */
	cJSON *sandboxes = informer_list_by_index(c->sandboxes, digest), *refs = cJSON_CreateArray();
	const cJSON *o;
	int active = 0, lagging = 0, others = 0;
	time_t now = time(NULL);
	char names[512] = "";
	cJSON_ArrayForEach(o, sandboxes)
	{
		const char *sn = meta_str(o, "name"), *su = meta_str(o, "uid"), *sns = meta_str(o, "namespace");
		const char *pn = jstr(jobj(o, "status"), "podName"), *pu = jstr(jobj(o, "status"), "podUID");
		if (!sn || !su || !sns || strcmp(sns, ns))
			continue;
		if (!pn || !pu || strcmp(pn, name) || strcmp(pu, uid)) {
			/* Our status write binding it may not be in the cache yet. A
			 * Sandbox of its scope that is not bound to this very pod
			 * speaks for its name all the same: it adopts a pod of ours
			 * (putting its reference back) or, for a forged one that
			 * replays a genuine seal, reports ForeignPodConflict; the
			 * controller deletes no pod it cannot certify as its own. */
			lagging |= sbx_written_lagging(c->written, su, meta_str(o, "resourceVersion"));
			others += !meta_str(o, "deletionTimestamp");
			continue;
		}
		enum holder h = holder_state(c, ns, sn, su, now, digest);
		if (h == H_GONE)
			continue; /* being deleted (--cascade=orphan is), or another scope's */
		active += h == H_ACTIVE;
		cJSON_AddItemToArray(refs, sbx_rc_sandbox_ref(sn, su));
		size_t used = strlen(names);
		snprintf(names + used, sizeof names - used, "%s%s", used ? "," : "", sn);
	}
	int r;
	if (cJSON_GetArraySize(refs) > 0) {
		/* Someone removed the references of Sandboxes still bound to it
		 * (admission lets anyone who may patch pods remove them): put back,
		 * the lifecycle goes on deciding by them, and the pod goes with
		 * its last Sandbox again. A suspended or expired one is put back
		 * too, so that its release writes the record a resume or a retry
		 * of its key reads; the release follows at once (the restored
		 * references' event queues each). */
		r = restore_owners(c, ns, pod, refs);
		if (r == 0)
			log_kv(LOG_WARN, "sandbox pod's owner references restored", "namespace", ns, "pod", name,
			       "sandboxes", names, "active", active ? "yes" : "no");
	} else if (lagging) {
		r = WRITTEN_RECHECK_MS;
	} else if (others) {
		r = 0; /* the Sandboxes of its scope decide (see above) */
	} else {
		/* It runs its requester's command over its owner's folders, and
		 * nothing else would ever delete it: not the garbage collector (no
		 * owner), not the lifecycle (no Sandbox), not a revocation. Guarded
		 * by its uid and resourceVersion, so a Sandbox that adopted it
		 * meanwhile keeps it. */
		char path[600];
		sbx_rc_pod_path(path, sizeof path, ns, name);
		r = sbx_rc_delete(c, path, uid, rv);
		if (r == 0)
			log_kv(LOG_INFO, "sandbox pod without its Sandbox deleted", "namespace", ns, "pod", name, "owner",
			       annotation(pod, SBX_ANN_OWNER));
	}
	cJSON_Delete(refs);
	cJSON_Delete(sandboxes);
	cJSON_Delete(pod);
	return r;
}
