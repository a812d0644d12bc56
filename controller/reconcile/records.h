/* Claim records (sandbox/claimrec.h) on the API server: the verified
 * records of a scope from the cache or one read live, a released
 * generation's record written, a warm claim's Bound record created and
 * re-pointed, and an Expired record collected. Every write goes through
 * here; what a record means for a Sandbox is reconcile/lifecycle.h. */
#ifndef SBX_RECONCILE_RECORDS_H
#define SBX_RECONCILE_RECORDS_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "kube/errors.h"
#include "reconcile/view.h"
#include "sandbox/claimrec.h"

struct sbx_controller;

/* The path of the record ns/name (name NULL: the namespace's collection). */
void sbx_rec_path(char *out, size_t n, const char *ns, const char *name);
/* The verified claim records of v's digest, from the cache (caller frees the
 * array of parsed-and-checked objects; entries that do not verify are left
 * out). */
cJSON *sbx_rec_cached(struct sbx_controller *c, const struct sbx_view *v);
/* The live claim record name of v's digest into *out (caller frees; NULL:
 * none, or one that does not verify, which counts for nothing). 0, 1 when
 * one stands that does not verify, or -1 when it cannot be read. */
int sbx_rec_live(struct sbx_controller *c, const struct sbx_view *v, const char *name, cJSON **out);
/* Fills rec (its state aside) as a record of v's generation claim named
 * name (the claim's, or a quota slot's) naming pod_name, claimed at claimed,
 * held by sandbox since v's now; -1 when claim is not of v's scope. */
int sbx_rec_fill(struct sbx_controller *c, const struct sbx_view *v, struct sbx_claimrec *rec, const char *name,
		 const char *claim, const char *pod_name, time_t claimed, const char *sandbox);
/* Writes the claim record of pod's generation: created, or the stored one
 * replaced when it says otherwise (or is not ours). Returns 0, a delay
 * (someone wrote it meanwhile), or -1. */
int sbx_rec_put_released(struct sbx_controller *c, const struct sbx_view *v, const cJSON *pod, enum sbx_claim_state state,
			 const char *sandbox, const cJSON *owner_refs);
/* Writes the record from (a verified one of v's digest) in state, naming
 * sandbox, owned by no one (Expired): as sbx_rec_put_released. */
int sbx_rec_put_expired(struct sbx_controller *c, const struct sbx_view *v, const struct sbx_claimrec *from,
			const char *sandbox);
/* The ownerReferences of a stored (or trimmed) record, whole again (a new
 * array; caller frees). */
cJSON *sbx_rec_refs(const cJSON *obj);
/* Creates v's Bound record of claim naming pod_name, claimed at claimed:
 * KUBE_OK with *rv (32 bytes) its resourceVersion, or what the API said. A
 * lost response is read back: the record that names pod_name and is owned by
 * v is this create. */
enum kube_err sbx_rec_create_bound(struct sbx_controller *c, const struct sbx_view *v, const char *claim,
				   const char *pod_name, const char *claimed, char rv[32]);
/* Points the Bound record of claim (claimed at claimed, owned by refs; NULL:
 * v) at pod_name: a PUT guarded by *rv, which gets the new version. KUBE_OK,
 * KUBE_ERR_CONFLICT / NOT_FOUND when someone else changed it, or an error. */
enum kube_err sbx_rec_repoint(struct sbx_controller *c, const struct sbx_view *v, const char *claim,
			      const char *pod_name, const char *claimed, const cJSON *refs, char rv[32]);
/* How long after its key's lifetime ended an Expired record is kept: longer
 * than a cache that still counts as current lags (a minute without a watch
 * makes it not current), so a Sandbox created before the end is judged by it
 * whenever it is seen. */
#define SBX_REC_COLLECT_GRACE_S 120
/* Garbage collection of claim records (the queue's claim items): deletes an
 * Expired record SBX_REC_COLLECT_GRACE_S after its key's lifetime ended, and
 * not while the Sandbox cache holds a Sandbox of its scope created before
 * that end and not judged yet; returns a delay until then, 0 when done. */
int sbx_rec_collect(struct sbx_controller *c, const char *ns, const char *name);

#endif
