/* The owner authorization record (contract section 2a): the admission
 * webhook asks the API server whether the identity creating a Sandbox may
 * `use` workspaces/<owner> and, when it may, stamps two annotations:
 *
 *   sandbox.dev/requested-by:        <username>            (audit)
 *   sandbox.dev/owner-authorization: v1.<issued>.<form>.<mac>
 *
 * mac is the lowercase hex HMAC-SHA256, under the controller's seal key, of
 *   lp("sandbox.dev/owner-authorization/v1") || lp(namespace) || form ||
 *   lp(owner) || lp(fingerprint) || lp(username) || lp(issued)
 * where form is 'n' || lp(metadata.name), or 'g' || lp(metadata.generateName)
 * when the client let the server pick the name (the name does not exist yet
 * when mutating admission runs). No tenant holds the key, so no tenant can
 * forge it; it names the exact intent (namespace, owner, spec fingerprint,
 * which covers the key) and the requester, so copying it onto another
 * Sandbox yields at most that same intent; and it is only honoured for a
 * Sandbox created within a short window after it was issued, so an old
 * record cannot be replayed once the requester's access is gone. */
#ifndef SBX_SANDBOX_AUTHZ_H
#define SBX_SANDBOX_AUTHZ_H

#include <stddef.h>
#include <time.h>

#define SBX_ANN_REQUESTED_BY "sandbox.dev/requested-by"
#define SBX_ANN_OWNER_AUTHZ "sandbox.dev/owner-authorization"
/* How long after issue, and how far before it (clock skew between the
 * webhook replica and the API server), a record may be used. */
#define SBX_AUTHZ_MAX_AGE_S 300
#define SBX_AUTHZ_MAX_SKEW_S 60
/* Longest record: "v1." + 20 + "." + "n" + "." + 64, with room to spare. */
#define SBX_AUTHZ_MAX 128
/* Longest requester name or record kept in the Sandbox cache. */
#define SBX_AUTHZ_MAX_FIELD 1024

/* What is authorized. name is metadata.name, or NULL with generate_name set
 * when the server picks the name. */
struct sbx_authz_subject {
	const char *ns;
	const char *name;
	const char *generate_name;
	const char *owner;
	const char *fingerprint;
	const char *username;
};

/* Writes the record issued at `issued` into out (outlen >= SBX_AUTHZ_MAX).
 * Returns 0, or -1 when a field is missing or the key is too short (then out
 * is ""). */
int sbx_authz_issue(const unsigned char *key, size_t keylen, const struct sbx_authz_subject *s, time_t issued,
		    char *out, size_t outlen);

enum sbx_authz_check {
	SBX_AUTHZ_OK = 0,
	SBX_AUTHZ_MISSING,   /* no record or no requester */
	SBX_AUTHZ_MALFORMED, /* not a v1 record */
	SBX_AUTHZ_MISMATCH,  /* the MAC does not match this Sandbox (forged or copied) */
	SBX_AUTHZ_STALE,     /* issued too long before (or after) the Sandbox was created */
};

/* Checks `record` for a stored Sandbox: s->name is its name and
 * s->generate_name its generateName (either form of record is accepted, the
 * 'g' form only when generate_name is set and a prefix of name); created is
 * its creationTimestamp. Tries each of the nkeys keys (rotation). */
enum sbx_authz_check sbx_authz_verify(const unsigned char *const *keys, const size_t *keylens, size_t nkeys,
				      const struct sbx_authz_subject *s, time_t created, const char *record);

/* Returns a static description of c. */
const char *sbx_authz_str(enum sbx_authz_check c);

#endif
