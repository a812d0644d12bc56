/* The adoption check (contract section 5): whether a pod found under the
 * expected name or digest is a genuine claim of this scope. Every field is
 * read from the pod itself and compared; a list filter that selected the pod
 * proves nothing. */
#ifndef SBX_SANDBOX_VERIFY_H
#define SBX_SANDBOX_VERIFY_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "sandbox/scope.h"

enum sbx_verify {
	SBX_VERIFY_OK = 0,
	SBX_VERIFY_NOT_MANAGED,		 /* managed-by / name labels missing or wrong */
	SBX_VERIFY_DIGEST_MISMATCH,	 /* sandbox.dev/scope-digest label != expected */
	SBX_VERIFY_OWNER_MISMATCH,	 /* owner annotation absent/present/value differs */
	SBX_VERIFY_FINGERPRINT_MISMATCH, /* genuine pod of the scope, other spec */
	SBX_VERIFY_NAMESPACE_MISMATCH,
	SBX_VERIFY_TERMINATING, /* metadata.deletionTimestamp set */
	SBX_VERIFY_BAD_SEAL,	/* seal missing, malformed or not the controller's */
	SBX_VERIFY_MALFORMED, /* not an object; metadata, name, fingerprint or claimed-at missing */
	SBX_VERIFY_PAYLOAD_MISMATCH, /* sealed metadata, but containers/volumes not what we build */
};

struct sbx_verify_expect {
	const char *ns;
	const char *owner; /* NULL = none */
	const struct sbx_scope *scope;
	const unsigned char *seal_key;
	size_t seal_keylen;
	/* 1 normally; 0 to ask only "is this a genuine pod of this scope", so
	 * the caller can tell IdempotencyKeyConflict (a genuine pod with another
	 * fingerprint) from ForeignPodConflict. */
	int check_fingerprint;
};

/* Checks pod against e, in this order: malformed, namespace, not managed,
 * digest, owner, seal (recomputed over the pod's own namespace, name, digest
 * label, owner, fingerprint and claimed-at annotations), terminating,
 * fingerprint. The seal covers the fingerprint annotation, so
 * SBX_VERIFY_FINGERPRINT_MISMATCH means "genuine, but another spec". Returns
 * the first failing check or SBX_VERIFY_OK; a missing seal key never yields
 * OK. */
enum sbx_verify sbx_pod_verify(const cJSON *pod, const struct sbx_verify_expect *e);

/* The seal covers the pod's identity, not its payload, so a genuine seal can be
 * replayed onto a pod with another image or volumes by whoever may delete and
 * create pods. Before a pod is adopted, its payload is compared with the pod the
 * controller would build (expected, from sbx_pod_build): the container's image,
 * command, args, env and volume mounts, every volume's source, the runtime
 * class, and no extra containers or volumes. Returns SBX_VERIFY_OK or
 * SBX_VERIFY_PAYLOAD_MISMATCH (SBX_VERIFY_MALFORMED for a non-object). */
enum sbx_verify sbx_pod_payload_verify(const cJSON *live, const cJSON *expected);
/* Returns a static human-readable description of v. */
const char *sbx_verify_str(enum sbx_verify v);

#endif
