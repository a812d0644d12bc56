/* The admission decisions for Sandboxes (contract sections 2a and 6), as
 * functions of the decoded request and a policy, so they are tested without
 * a cluster:
 *
 * mutate (CREATE): refuses reserved sandbox.dev/ labels and annotations set
 *   by the requester; checks that the requester may use the workspace owner
 *   (SubjectAccessReview, unless ownerAuthorization is namespace); stamps
 *   sandbox.dev/requested-by, the owner authorization record
 *   (sandbox/authz.h) and, with a key, the sandbox.dev/scope-digest label
 *   that indexes Sandboxes by scope. With spec.network.profiles: refuses a
 *   profile that does not exist or that the requester may not `use`
 *   (SubjectAccessReview, whatever ownerAuthorization says: profiles are
 *   the operator's, cluster-wide), naming it, and stamps the record of that
 *   authorization, sandbox.dev/network-authorization (sandbox/netprofile.h).
 * mutate (UPDATE): puts back reserved entries the request dropped (a
 *   server-side apply of the original manifest omits them).
 * validate (CREATE, UPDATE): on CREATE, only the webhook's own reserved
 *   metadata, matching this request; a key held in the same scope with
 *   another spec, by a live Sandbox or by the claim record of the key's
 *   generation (which outlives its Sandboxes until the key's lifetime
 *   ends), is refused with 422 naming the holder; and a new intent past its
 *   owner's full Reject-mode quota with 403 naming the owner, the count and
 *   the limit (early: the controller's bind is the authority; a retry of an
 *   intent that holds a slot, a Sandbox created suspended and one that
 *   joins its intent's generation, suspended or not, pass).
 *   On UPDATE, reserved metadata and spec never change.
 * Deletes are never sent here. */
#ifndef SBX_WEBHOOK_SANDBOX_ADMISSION_H
#define SBX_WEBHOOK_SANDBOX_ADMISSION_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "sandbox/config.h"
#include "webhook/admission.h"

struct wh_sandbox_policy {
	const unsigned char *const *keys; /* seal keys, newest first: keys[0] signs */
	const size_t *keylens;
	size_t nkeys;
	enum sbx_owner_authz owner_authz;
	long key_lifetime_s;
	/* Whether user_info may use owner in ns: 1 yes, 0 no (why: the
	 * authorizer's words, may be ""), -1 could not be asked (why says why).
	 * owner NULL: every owner of ns (a review without a resource name; see
	 * ask_every_name_first). */
	int (*may_use_owner)(void *ctx, const cJSON *user_info, const char *ns, const char *owner, char *why,
			     size_t whylen);
	/* A new array (caller frees) of the cached Sandboxes labelled with
	 * this scope digest, or NULL when the cache cannot answer. */
	cJSON *(*by_digest)(void *ctx, const char *digest);
	/* The sandbox.dev/workspace-owner annotation of pod ns/name into owner
	 * ("" when it has none): 1 when the pod exists, 0 when it does not, -2
	 * when it is not a sandbox pod the controller knows (never read live),
	 * -1 when it cannot be read now. */
	int (*pod_owner)(void *ctx, const char *ns, const char *name, char *owner, size_t ownerlen);
	/* Whether the owner's quota (sandbox/quota.h, mode Reject) is full for
	 * a new intent of scope digest of owner (NULL: ownerless) in ns: 1 with
	 * msg naming the owner, the count and the limit, else 0 (also when the
	 * caches cannot tell: the controller's bind decides). NULL: no quotas. */
	int (*quota_refuses)(void *ctx, const char *ns, const char *owner, const char *digest, char *msg,
			     size_t msglen);
	void *ctx;
	/* Whether user_info may use the cluster-scoped allow profile (verb use
	 * on sandboxnetworkprofiles.sandbox.dev named profile; NULL: every
	 * profile): as may_use_owner. NULL: no Sandbox may name a profile. */
	int (*may_use_profile)(void *ctx, const cJSON *user_info, const char *profile, char *why, size_t whylen);
	/* Whether the profile exists: 1 yes, 0 no, -1 the cache cannot tell
	 * (not synced). NULL: as -1. */
	int (*profile_exists)(void *ctx, const char *profile);
	/* A new array (caller frees) of the cached claim records
	 * (sandbox/claimrec.h) labelled with this scope digest, as stored
	 * (verified here with keys, as the controller does), or NULL when the
	 * cache cannot answer. NULL: records are not consulted. */
	cJSON *(*records_by_digest)(void *ctx, const char *digest);
	/* Configuration admission.askEveryNameFirst (sandbox/config.h): ask
	 * may_use_owner and may_use_profile about every name (owner NULL,
	 * profile NULL: a review without a resource name) before the name
	 * itself, and take a yes for every name. Off by default. */
	int ask_every_name_first;
};

/* Decides a mutating review; fills v (release with wh_verdict_release).
 * now is the time the record is issued at. */
void wh_sandbox_mutate(const struct wh_sandbox_policy *p, const struct wh_review *r, time_t now,
		       struct wh_verdict *v);
/* Decides a validating review; fills v. */
void wh_sandbox_validate(const struct wh_sandbox_policy *p, const struct wh_review *r, time_t now,
			 struct wh_verdict *v);

/* Whether user_info may use owner in ns, as p->may_use_owner answers (1,
 * 0, -1 with why). With p->ask_every_name_first the question about every
 * owner (no name) is asked first and a yes taken for this owner too; off,
 * only the owner's own name is asked about (contract section 2a: an
 * authorizer may refuse a name that an unnamed question allows). */
int wh_may_use_owner(const struct wh_sandbox_policy *p, const cJSON *user_info, const char *ns, const char *owner,
		     char *why, size_t whylen);

/* 1 when key is a reserved label/annotation key (prefix sandbox.dev/). */
int wh_reserved_key(const char *key);

#endif
