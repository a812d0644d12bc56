/* What a live pod under a claim name means for a Sandbox (examine.h). */
#include "reconcile/examine.h"

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
#include "reconcile/state.h"
#include "reconcile/writes.h"
#include "sandbox/podbuild.h"
#include "sandbox/verify.h"

int sbx_rc_owned_by(const cJSON *pod, const char *uid, int *is_controller)
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
	cJSON *ref = sbx_rc_sandbox_ref(v->name, v->uid);
	cJSON_AddFalseToObject(ref, "controller");
	cJSON_AddTrueToObject(ref, "blockOwnerDeletion");
	cJSON_AddItemToArray(refs, ref);
	char *body = cJSON_PrintUnformatted(patch);
	cJSON_Delete(patch);
	char path[512];
	sbx_rc_pod_path(path, sizeof path, v->ns, meta_str(pod, "name"));
	enum kube_err e =
	    kube_request(c->kc, "PATCH", path, NULL, body, "application/strategic-merge-patch+json", NULL, err);
	free(body);
	return e;
}

/* 1 when the live pod is certified for v (sbx_pod_payload_verify: the whole
 * pod, not only its sealed identity; a replayed seal on another payload is
 * foreign); else 0 with the reason in why. */
int sbx_rc_payload_matches(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, char *why,
			   size_t whylen)
{
	const char *claimed = annotation(pod, SBX_ANN_CLAIMED_AT), *seal = annotation(pod, SBX_ANN_SEAL);
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
int sbx_rc_key_expired(const struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod)
{
	time_t claimed = 0;
	if (ktime_parse_rfc3339(annotation(pod, SBX_ANN_CLAIMED_AT), &claimed) < 0)
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
	int ours = sbx_rc_owned_by(pod, v->uid, &is_controller);
	const char *fp = annotation(pod, "sandbox.dev/spec-fingerprint");
	if (fp && !strcmp(fp, v->scope.fingerprint) && !sbx_rc_payload_matches(c, v, pod, why, sizeof why)) {
		vr = SBX_VERIFY_PAYLOAD_MISMATCH;
		goto foreign;
	}
	if (!ours) {
		int expired = sbx_rc_key_expired(c, v, pod);
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

const char *sbx_rc_claim_of(const cJSON *pod)
{
	const char *cl = annotation(pod, SBX_ANN_CLAIM);
	return cl ? cl : meta_str(pod, "name");
}
