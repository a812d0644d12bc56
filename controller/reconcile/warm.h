/* The warm bind (contract section 8; docs/api.md "The atomic warm claim"):
 * a new Sandbox whose spec without idempotencyKey and lifecycle equals a
 * pool's template and owner is bound to one of the pool's Ready warm pods.
 *
 *   1. claim: create the scope's claim record sbx-<digest>[-<n>] (state
 *      Bound, podName the warm pod), owned by the Sandbox: the atomic step;
 *   2. take: patch the warm pod from pool member to the scope's pod, with
 *      its resourceVersion as a precondition (exactly one taker wins);
 *   3. certify the pod the patch returned against the pod the controller
 *      builds for the Sandbox, and report (binding Warm).
 * A lost take points the record at another warm pod or at the cold name (a
 * PUT guarded by the record's resourceVersion); a record another wrote
 * first goes back to the claim loop (reconcile.c). In a namespace with pools
 * the cold path claims through the record too (then creates the pod under
 * the record's name), so both paths race for one object. */
#ifndef SBX_RECONCILE_WARM_H
#define SBX_RECONCILE_WARM_H

#include <cjson/cJSON.h>

struct sbx_controller;
struct sbx_view;
struct sbx_claimrec;

/* 1 when claims in namespace ns go through a claim record: the pool cache
 * shows a SandboxWarmPool there, or is not current (it cannot say). */
int sbx_warm_record_namespace(struct sbx_controller *c, const char *ns);

/* What a warm claim tells the claim loop. */
enum sbx_warm {
	SBX_WARM_DONE,	 /* v is done with: *r the reconcile's result (bound, or an error) */
	SBX_WARM_COLD,	 /* v holds the record of `claim`: the caller creates its cold pod */
	SBX_WARM_RECORD, /* another's record of `claim` stands (another Sandbox of the scope or
			    another replica was first): the caller examines it as any record */
};

/* A fresh generation `claim` (sbx-<digest>[-<n>]) of v in a record
 * namespace. Binds a Ready warm pod when a settled pool serves v (a hit), or
 * claims the record for the cold pod (a miss). A record it finds in the way
 * is not examined here but by the claim loop, which examines records (so the
 * warm bind never calls back into the lifecycle that calls it). */
enum sbx_warm sbx_warm_claim(struct sbx_controller *c, struct sbx_view *v, const char *claim, int *r);

/* Whether v's requester may still have a pod made for it now: 1, or 0 with
 * *r set (the refusal reported). The lifecycle's sbx_lc_claim_allowed,
 * passed in so that warm binds never call back into the lifecycle. */
typedef int (*sbx_warm_allowed_fn)(struct sbx_controller *c, const struct sbx_view *v, int *r);

/* A Bound claim record rec (the cached object, verified) of v's generation
 * claim whose pod is not bound to the scope: completes the take of a warm
 * pod that is still a pool member, or points the record at the cold name.
 * A take that did not happen yet is made for v's requester now: allowed is
 * asked first (a take that went through, the run begun, is not). Returns 1
 * when v is done with (*r set), 0 when the caller creates the cold pod
 * `claim`. */
int sbx_warm_resume_claim(struct sbx_controller *c, struct sbx_view *v, const cJSON *rec, const char *claim,
			  sbx_warm_allowed_fn allowed, int *r);

#endif
