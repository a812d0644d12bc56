/* Sandbox lifecycle (contract sections 2 and 5a): spec.lifecycle, the one
 * mutable part of a spec, and what the controller does with it.
 *
 * A bound Sandbox is active while it is not suspended, not expired and not
 * being deleted; a pod runs while at least one Sandbox bound to it is
 * active. Expired (shutdownTime reached) is final for a Sandbox. A pod no
 * active Sandbox holds is released: a claim record (sandbox/claimrec.h)
 * saying what became of its generation is written first, then the pod is
 * deleted with its uid and resourceVersion as preconditions, so a Sandbox
 * that joined it in between keeps it. The decisions are here; the writes go
 * through the reconcile's own helpers (sandbox/reconcile_int.h). */
#ifndef SBX_SANDBOX_LIFECYCLE_H
#define SBX_SANDBOX_LIFECYCLE_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

/* spec.lifecycle, parsed. */
struct sbx_lifecycle {
	int has_shutdown;  /* shutdownTime present */
	time_t shutdown;   /* valid when has_shutdown */
	int delete_policy; /* shutdownPolicy Delete (absent or Retain: 0) */
	int suspend;       /* suspend true */
};

/* Parses spec.lifecycle (absent: all zero). Returns 0, or -1 with a message
 * naming the field when it is not an object, shutdownTime is not an RFC 3339
 * time, shutdownPolicy is not Retain or Delete, or suspend is not a boolean,
 * or it holds another member. */
int sbx_lifecycle_parse(const cJSON *spec, struct sbx_lifecycle *out, char *msg, size_t msglen);

/* 1 when a and b are the same spec but for their lifecycle members. */
int sbx_spec_same_intent(const cJSON *a, const cJSON *b);

/* Returns a new object holding (as references, not copies) every member of
 * spec but lifecycle: what the fingerprint and the digest are computed over.
 * Free it with cJSON_Delete; spec is untouched and must outlive it. */
cJSON *sbx_spec_intent(const cJSON *spec);

/* 1 when shutdownTime is present and reached at now. */
int sbx_lifecycle_expired(const struct sbx_lifecycle *l, time_t now);

#endif
