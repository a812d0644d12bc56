/* The Sandbox status as a pure function of what the reconcile decided, so the
 * condition bookkeeping (observedGeneration, lastTransitionTime kept while the
 * status of a condition does not change) is testable without a cluster. */
#ifndef SBX_SANDBOX_STATUS_H
#define SBX_SANDBOX_STATUS_H

#include <cjson/cJSON.h>

/* What the reconcile decided. NULL strings are written as absent (null in the
 * merge patch, so stale values are cleared). */
struct sbx_status_in {
	const char *phase; /* Pending, Running, Succeeded, Failed, Rejected, Suspended, Expired */
	const char *pod_name;
	const char *pod_uid;
	const char *scope_digest;
	const char *fingerprint;
	const char *binding; /* Created, Adopted or NULL */
	const char *claimed_at;
	const char *key_expires_at;
	const char *pod_ip;		/* the bound pod's IP while it runs */
	long long suspended_generation; /* > 0: the generation suspended at; 0: the old status's kept */
	long long generation;
	int bound;		  /* Bound condition: 1 True, 0 False */
	const char *bound_reason; /* PodCreated, PodAdopted, Waiting, IdempotencyKeyConflict, InvalidSpec, ForeignPodConflict */
	const char *bound_message;
	int ready;		  /* Ready condition: 1 True, 0 False */
	const char *ready_reason; /* PodReady, PodPending, PodSucceeded, PodFailed, PodMissing, NotBound */
	const char *ready_message;
	/* Why the pod is not ready, in words (sandbox/podstate.h), written after
	 * ready_message as "<ready_message>: <ready_detail>"; "" for none. A
	 * copy of the struct carries it. */
	char ready_detail[512];
	/* The NetworkPolicyEnforced condition (reconcile/netverify.h): "True",
	 * "False" or "Unknown"; NULL: not written (no floor is kept). */
	const char *net_status;
	const char *net_reason;
	const char *net_message;
};

/* Builds the new status object (caller frees). old_status is the Sandbox's
 * current .status (may be NULL): a condition whose status is unchanged keeps
 * its lastTransitionTime; otherwise now (RFC 3339) is used. */
cJSON *sbx_status_build(const struct sbx_status_in *in, const cJSON *old_status, const char *now);

/* 1 when the two statuses say the same thing (lastTransitionTime ignored), so
 * an unchanged reconcile writes nothing. */
int sbx_status_same(const cJSON *a, const cJSON *b);

/* Finds condition `type` in a status (borrowed pointer or NULL). */
const cJSON *sbx_status_condition(const cJSON *status, const char *type);

#endif
