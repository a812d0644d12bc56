/* The view of one Sandbox that a reconcile decides on, and the outcomes the
 * parts of the controller tell each other about it: shared by the decision
 * (reconcile.c), the lifecycle, the warm bind, the claim records and the
 * writes. Types and constants only. */
#ifndef SBX_RECONCILE_VIEW_H
#define SBX_RECONCILE_VIEW_H

#include <time.h>

#include <cjson/cJSON.h>

#include "sandbox/api.h"
#include "sandbox/scope.h"
#include "sandbox/spec.h"

#define REQUEUE_BUSY_MS 25
#define REQUEUE_WAIT_MS 1000
#define REQUEUE_FOREIGN_MS 30000
/* A Sandbox waiting for a quota slot looks again this long after (a freed
 * slot wakes the first waiters sooner). */
#define REQUEUE_QUOTA_MS 30000
/* A Sandbox whose profile was deleted looks again this long after. */
#define REQUEUE_PROFILE_MS 15000
/* A Sandbox whose requester may no longer use its owner looks again this
 * long after (reconcile/lifecycle.h, sbx_lc_still_allowed). */
#define REQUEUE_REVOKED_MS 15000

/* Everything one reconcile needs about its Sandbox, borrowed from `obj`. */
struct sbx_view {
	const cJSON *obj;
	const char *ns, *name, *uid;
	long long generation;
	time_t created;
	const cJSON *spec, *status;
	const char *owner; /* NULL when spec.workspaceOwner is absent */
	const char *key;   /* NULL when spec.idempotencyKey is absent */
	struct sbx_scope scope;
	struct sbx_lifecycle lc;
	time_t now;
	long retry_after_ms; /* set by claim: the API's Retry-After for the next attempt */
	int timer;	     /* the result is only the wait for the shutdownTime */
	/* The owner authorization verified for this run (sbx_lc_owner_authorized):
	 * when it was issued (0: none verified), the run it is of, and whether
	 * it covers the requester's whole identity (a v3 record). */
	time_t authz_issued;
	long long authz_run;
	int authz_identity;
	/* The same of the allow profiles' record (sbx_lc_network_authorized):
	 * a creation's, or a resume's where no owner record covers it. */
	time_t net_issued;
	long long net_run;
	int net_identity;
};

/* What a pod or record found for a generation means for the claim: done
 * (reported), try the next generation, retry (backoff or soon), or create
 * the cold pod of the generation now. */
enum sbx_examine { EX_DONE,
		   EX_NEXT_GENERATION,
		   EX_RETRY,
		   EX_RETRY_SOON,
		   EX_CREATE };

/* How a Sandbox is bound: status.binding Adopted, Created or Warm. */
#define SBX_BIND_ADOPTED 0
#define SBX_BIND_CREATED 1
#define SBX_BIND_WARM 2

#endif
