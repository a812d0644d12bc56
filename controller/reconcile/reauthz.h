/* Whether an identity the admission webhook recorded may use a workspace
 * owner (or an allow profile) now (contract section 8; issue 23): a warm pool's pods are made,
 * kept and bound only while the identity that authorized the pool may still
 * `use` its owner, so a revoked author keeps no pod running over the owner's
 * workspace. Asked as a SubjectAccessReview for the recorded identity, whole
 * (username, uid, groups, extra; sandbox/authz.h), about `use` on
 * workspaces.sandbox.dev/<owner> in the namespace. An answer is kept for
 * SBX_REAUTHZ_ALLOW_MS when allowed and SBX_REAUTHZ_DENY_MS when refused,
 * counted from when its question was asked (not answered);
 * an error is never kept and never means allowed. Of two checks of one
 * question at once, the answer to the later-asked stands, whichever comes
 * back last. Thread-safe. */
#ifndef SBX_RECONCILE_REAUTHZ_H
#define SBX_RECONCILE_REAUTHZ_H

#include <stddef.h>
#include <stdint.h>

#include "kube/client.h"

/* How long an answer is kept (docs/api.md "Revocation"). */
#define SBX_REAUTHZ_ALLOW_MS 15000
#define SBX_REAUTHZ_DENY_MS 5000

struct sbx_reauthz;

/* Returns a new, empty cache of answers (caller frees with sbx_reauthz_free). */
struct sbx_reauthz *sbx_reauthz_new(void);
/* Frees ra; NULL is a no-op. */
void sbx_reauthz_free(struct sbx_reauthz *ra);

/* Whether identity (a recorded identity; NULL: only username is known, a
 * record made before identities were recorded) may use owner in ns now,
 * asked anew when fresh (a kept answer is not used, the new one is kept):
 * 1 yes; 0 no, with the authorizer's reason in why (may be ""); -1 when it
 * cannot be told now (the API did not answer, or the identity does not
 * parse), with why. kc is borrowed. */
int sbx_reauthz_check(struct sbx_reauthz *ra, struct kube_client *kc, const char *identity, const char *username,
		      const char *ns, const char *owner, int fresh, char *why, size_t whylen);

/* The same question about `use` on the cluster-scoped allow profile
 * sandboxnetworkprofiles.sandbox.dev/<profile> (a pool's profiles,
 * sandbox/netprofile.h), answers kept apart from the owners' and as long. */
int sbx_reauthz_check_profile(struct sbx_reauthz *ra, struct kube_client *kc, const char *identity,
			      const char *username, const char *profile, int fresh, char *why, size_t whylen);

/* The answers kept, by the key of their question (the checks' own; tests):
 * keeps `allowed` (1 or 0) and the authorizer's reason why (NULL: none) as
 * the answer to the question of key asked at asked_ms and answered at
 * now_ms (ktime_mono_ms), for its time from asked_ms. 1 kept, 0 not. */
int sbx_reauthz_keep(struct sbx_reauthz *ra, const char *key, int allowed, const char *why, int64_t asked_ms,
		     int64_t now_ms);
/* The answer kept for key at now_ms: 1, 0, or -1 (none, or its time is up);
 * its reason into why (NULL: not asked; "" for none). */
int sbx_reauthz_kept(struct sbx_reauthz *ra, const char *key, int64_t now_ms, char *why, size_t whylen);

#endif
