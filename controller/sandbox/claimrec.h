/* The claim record (docs/api.md, "The claim record"): a SandboxClaim named
 * like a key generation's pod (sbx-<digest>[-<n>]) in the Sandbox's
 * namespace, written by the controller alone when the generation's pod is not
 * the whole story:
 *
 *   Suspended  the pod was released (every Sandbox bound to it suspended,
 *              expired or gone, one at least suspended); a Sandbox of the
 *              scope and key that is not suspended joins the generation and
 *              re-creates its pod under podName with the same claim time.
 *              Owned by the Sandboxes bound to it (the garbage collector
 *              takes it with the last of them).
 *   Expired    the pod was released and no Sandbox of it can resume it: a new
 *              Sandbox of the scope and key within the key's lifetime gets
 *              phase Expired and no pod (the stored outcome), naming
 *              `sandbox`. No owners: it outlives its Sandboxes; the
 *              controller deletes it at keyExpiresAt.
 *
 *   Bound      the claim of a scope that may go warm (docs/api.md, "The
 *              atomic warm claim"): the generation's pod is podName (a warm
 *              pod's name, or the claim name itself for a cold pod). Owned
 *              by the Sandbox that claimed it.
 *   Rejected   its owner's quota was full, mode Reject (sandbox/quota.h): a
 *              new Sandbox of the scope and key within the key's lifetime
 *              gets phase Rejected and no pod (the stored outcome), naming
 *              `sandbox`. No owners; collected at keyExpiresAt.
 *   Slot       not a generation's record but one of its owner's quota slots,
 *              named sbxq-<owner key>-<n> (sandbox/quota.h) and labelled
 *              with the owner key instead of the digest: the generation
 *              (scopeDigest, podName = its claim name) holds it while its
 *              pod is active. Owned by the Sandbox that took it until the
 *              pod exists, then by the pod (the garbage collector frees it
 *              with the pod).
 *
 * A record is written before the pod is deleted; while the pod still exists
 * the pod, not the record, says what the generation is. Every field is
 * sealed (HMAC-SHA256 under the seal key, any key of the list verifying), so
 * a record anyone else wrote is never believed. */
#ifndef SBX_SANDBOX_CLAIMREC_H
#define SBX_SANDBOX_CLAIMREC_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "sandbox/api.h"
#include "sandbox/seal.h"

#define SBX_CLAIM_KIND "SandboxClaim"
#define SBX_CLAIM_PLURAL "sandboxclaims"

enum sbx_claim_state { SBX_CLAIM_SUSPENDED,
		       SBX_CLAIM_EXPIRED,
		       SBX_CLAIM_BOUND,
		       SBX_CLAIM_REJECTED,
		       SBX_CLAIM_SLOT,
		       SBX_CLAIM_WARM_SLOT };

struct sbx_claimrec {
	char name[80]; /* the claim name: sbx-<digest>[-<n>] */
	char digest[33];
	long generation;
	char pod_name[254];
	char claimed_at[32];
	char key_expires_at[32];
	char fingerprint[65];
	int has_owner;
	char owner[64];
	enum sbx_claim_state state;
	char sandbox[254]; /* the Sandbox whose suspension or expiry released the pod */
	char since[32];
	/* Suspended, Expired: the uid of the pod released ("" in records of
	 * earlier versions, sealed only when set). */
	char pod_uid[64];
	/* From the stored object (parse only): */
	char uid[64];
	char resource_version[32];
};

/* The SandboxClaim object of r in namespace ns, sealed with keys' newest key,
 * with owner_refs (an array, copied; NULL: none) as its ownerReferences
 * (caller frees): labelled with the digest, or (Slot, WarmSlot) with the
 * owner's quota key. NULL when a field is missing or too long. */
cJSON *sbx_claimrec_build(const struct sbx_claimrec *r, const char *ns, const struct sbx_seal_keys *keys,
			  const cJSON *owner_refs);

/* Reads and verifies a SandboxClaim (full or trimmed) of namespace ns into
 * out. Returns 0, or -1 with why when it is malformed or its seal does not
 * verify under any key (then it was not written by this controller and
 * counts for nothing). */
int sbx_claimrec_parse(const cJSON *obj, const char *ns, const struct sbx_seal_keys *keys, struct sbx_claimrec *out,
		       char *why, size_t whylen);

/* The informer's trimmer: name, namespace, uid, resourceVersion, the digest
 * and quota owner labels, the Sandbox and Pod ownerReferences (kind, name
 * and uid, at most 256) and the spec fields above, each bounded. Returns a
 * new object (caller frees); never NULL. */
cJSON *sbx_claimrec_trim(const cJSON *obj);

/* The generation of a claim name (sbx-<digest> 0, sbx-<digest>-<n> n), or
 * -1 when name is not one of digest's. */
long sbx_claim_generation(const char *name, const char *digest);

/* "Suspended", "Expired", "Bound", "Rejected", "Slot" or "WarmSlot" (a
 * static string). */
const char *sbx_claim_state_str(enum sbx_claim_state s);

#endif
