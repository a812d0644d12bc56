/* The scope digest and spec fingerprint (contract section 3): the names under
 * which the controller claims a pod for an idempotency key. Changing anything
 * here orphans live pods, so scope-vectors.json pins the output. */
#ifndef SBX_SANDBOX_SCOPE_H
#define SBX_SANDBOX_SCOPE_H

#include <stddef.h>

#include <cjson/cJSON.h>

struct sbx_scope {
	char digest[33];      /* 32 lowercase hex: first half of SHA-256(M) */
	char fingerprint[65]; /* 64 lowercase hex: SHA-256(JCS(spec without lifecycle)) */
};

/* Computes the scope of a Sandbox from its namespace, metadata.uid and stored
 * spec; spec.lifecycle is left out of the fingerprint (and so of the digest of
 * a Sandbox without owner): sbx_spec_intent. The owner is present iff spec has a "workspaceOwner" string member,
 * the key iff it has an "idempotencyKey" string member (uid is only used, and
 * only required, when the key is absent). Returns 0, or -1 with a message in
 * err (size errlen) when the spec cannot be canonicalized, an argument is
 * missing, or workspaceOwner/idempotencyKey is present but not a string (never
 * read as "absent"); on error out is zeroed. */
int sbx_scope_compute(const char *ns, const char *uid, const cJSON *spec, struct sbx_scope *out,
		      char *err, size_t errlen);

/* The template fingerprint of a spec: lowercase hex SHA-256 of the RFC 8785
 * form of the spec without idempotencyKey and lifecycle (a Sandbox's), or of
 * a pool's template with its workspaceOwner (sbx_pool_spec): equal exactly
 * when a warm pod of the pool may serve the Sandbox. out holds 65 bytes.
 * Returns 0 or -1 (the spec cannot be canonicalized). */
int sbx_template_fingerprint(const cJSON *spec, char out[65]);

/* Writes the pod name of a claim into out (outlen >= 64): generation 0 is
 * "sbx-<digest>", n > 0 is "sbx-<digest>-<n>". */
void sbx_pod_name(const struct sbx_scope *s, unsigned generation, char *out, size_t outlen);

#endif
