/* The owner authorization record (contract section 2a): the admission
 * webhook asks the API server whether the identity creating (or resuming) a
 * Sandbox may `use` workspaces/<owner> and, when it may, stamps two
 * annotations:
 *
 *   sandbox.dev/requested-by:        <username>            (audit; on a
 *                                    resume sandbox.dev/resumed-by)
 *   sandbox.dev/owner-authorization: v2.<issued>.<run>.<mac>
 *
 * mac is the lowercase hex HMAC-SHA256, under the controller's seal key, of
 *   lp("sandbox.dev/owner-authorization/v2") || lp(namespace) || lp(name) ||
 *   lp(owner) || lp(fingerprint) || lp(username) || lp(issued) || lp(run)
 * with run the metadata.generation the record authorizes: 1 for a creation,
 * the generation of the update that resumes it for a resume. The name is the
 * Sandbox's own: for a generateName create the webhook picks the name itself
 * (mutating admission runs before the server would), so no record names a
 * prefix others may share. No tenant holds the key, so no tenant can forge a
 * record; it names the exact intent (namespace, name, owner, spec
 * fingerprint, which covers the key), the requester and the run, so copying
 * it onto another Sandbox, or keeping it for a later run, yields nothing; a
 * creation record is only honoured for a Sandbox created within a minute of
 * it. It is not bound to the uid (mutating admission runs before the uid
 * exists): a record replayed on a re-created Sandbox of the same name within
 * that minute counts only when the webhook was in force for that creation
 * (reconcile/inforce.h), and then the webhook refuses the replayed annotations.
 *
 * A record that may be used long after it was made (a SandboxWarmPool's:
 * its warm pods are made and bound for as long as the pool stands; a
 * Sandbox's whose pod comes late, after a quota wait) names the whole
 * identity, so that the controller can ask again whether that identity may
 * still use the owner (issue 23): a third annotation
 *
 *   sandbox.dev/authorized-identity: <JCS of {username, uid, groups, extra}>
 *
 * and the record v3.<issued>.<run>.<mac>, whose MAC also covers
 * lp(identity) after lp(username) ("sandbox.dev/owner-authorization/v3").
 * A Sandbox's resume record names the resumer's identity, kept apart in
 * sandbox.dev/resumed-identity (the creator's stays: the profiles' record
 * of the creation covers it).
 *
 * The same record (v3 with the creator's identity), in
 * sandbox.dev/network-authorization, records a Sandbox's right to use its
 * allow profiles (sandbox/netprofile.h): owner
 * "network-profiles:<sorted names>", which no owner can be (':' is not in
 * an owner name), so neither record stands for the other. A resume of a
 * Sandbox that has no owner record (no owner, or owners not asked about)
 * gets this record anew instead, of the resume's run and issued to the
 * resumer.
 *
 * Records of the previous format (v1.<issued>.n.<mac>, run 1) still verify,
 * for a rolling upgrade; v1's generateName form (.g.) no longer does. */
#ifndef SBX_SANDBOX_AUTHZ_H
#define SBX_SANDBOX_AUTHZ_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#define SBX_ANN_REQUESTED_BY "sandbox.dev/requested-by"
#define SBX_ANN_RESUMED_BY "sandbox.dev/resumed-by"
#define SBX_ANN_OWNER_AUTHZ "sandbox.dev/owner-authorization"
#define SBX_ANN_AUTHZ_IDENTITY "sandbox.dev/authorized-identity"
/* A resume's: the resumer's identity, beside the creator's. */
#define SBX_ANN_RESUMED_IDENTITY "sandbox.dev/resumed-identity"
/* Longest identity recorded (its JCS form): far above any authenticator's
 * (a username, a uid, dozens of groups), far below an object's 256 KiB of
 * annotations. */
#define SBX_AUTHZ_IDENTITY_MAX 16384
/* How long after issue, and how far before it (clock skew between the
 * webhook replica and the API server), a creation record may be used (v1
 * records: SBX_AUTHZ_V1_MAX_AGE_S). */
#define SBX_AUTHZ_MAX_AGE_S 60
#define SBX_AUTHZ_MAX_SKEW_S 60
#define SBX_AUTHZ_V1_MAX_AGE_S 300
/* Longest record: "v2." + 20 + "." + 19 + "." + 64, with room to spare. */
#define SBX_AUTHZ_MAX 128
/* Longest requester name or record kept in the Sandbox cache. */
#define SBX_AUTHZ_MAX_FIELD 1024

/* What is authorized. run is the generation the record authorizes (>= 1);
 * sbx_authz_verify reads it from the record instead. identity (NULL: none)
 * is the recorded identity (sbx_authz_identity): with it the record is v3. */
struct sbx_authz_subject {
	const char *ns;
	const char *name;
	const char *owner;
	const char *fingerprint;
	const char *username;
	long long run;
	const char *identity;
};

/* The identity to record of an AdmissionReview's userInfo: the JCS form of
 * its username, uid, groups and extra (the members present, each of the
 * type Kubernetes gives it). Returns a new string (caller frees), or NULL
 * when user_info has no username, a member of another type, or the form is
 * longer than SBX_AUTHZ_IDENTITY_MAX. */
char *sbx_authz_identity(const cJSON *user_info);
/* The userInfo object of a recorded identity (caller frees with
 * cJSON_Delete), checked as sbx_authz_identity checks it; NULL otherwise. */
cJSON *sbx_authz_identity_parse(const char *identity);

/* Writes the record issued at `issued` into out (outlen >= SBX_AUTHZ_MAX):
 * v3 when s->identity is set, else v2. Returns 0, or -1 when a field is
 * missing, run < 1 or the key is too short (then out is ""). */
int sbx_authz_issue(const unsigned char *key, size_t keylen, const struct sbx_authz_subject *s, time_t issued,
		    char *out, size_t outlen);

enum sbx_authz_check {
	SBX_AUTHZ_OK = 0,
	SBX_AUTHZ_MISSING,   /* no record or no requester */
	SBX_AUTHZ_MALFORMED, /* not a v1 record */
	SBX_AUTHZ_MISMATCH,  /* the MAC does not match this Sandbox (forged or copied) */
	SBX_AUTHZ_STALE,     /* issued too long before (or after) the Sandbox was created */
};

/* What a verified record says. */
struct sbx_authz_info {
	long long run; /* the generation it authorizes (1: the creation) */
	time_t issued;
	int has_identity; /* a v3 record: it covers s->identity */
};

/* Checks `record` for a stored Sandbox (s->name its name; s->run ignored):
 * a creation record (run 1) must have been issued within the window around
 * created, its creationTimestamp; a resume record (run > 1) is checked for
 * its run by the caller (info). Tries each of the nkeys keys (rotation).
 * A v3 record verifies only with s->identity, the annotation as stored; an
 * older one ignores it. info (NULL ok) is filled when the result is
 * SBX_AUTHZ_OK. */
enum sbx_authz_check sbx_authz_verify(const unsigned char *const *keys, const size_t *keylens, size_t nkeys,
				      const struct sbx_authz_subject *s, time_t created, const char *record,
				      struct sbx_authz_info *info);

/* Returns a static description of c. */
const char *sbx_authz_str(enum sbx_authz_check c);

/* The controller's note that a warm pool's record was made while the
 * admission webhook was in force (reconcile/inforce.h), kept in the pool's
 * status.ownerAuthorizationVerified so that a later change of the webhook
 * configuration (or a restart) does not take back what was verified: the
 * lowercase hex HMAC-SHA256, under the seal key, of
 *   lp("sandbox.dev/owner-authorization-in-force/v1") || lp(namespace) ||
 *   lp(pool name) || lp(pool uid) || lp(record)
 * Writes it into out (65 bytes); 0, or -1 (a field missing, the key too
 * short). */
int sbx_authz_attest(const unsigned char *key, size_t keylen, const char *ns, const char *name, const char *uid,
		     const char *record, char out[65]);
/* 1 when attest is that note for (ns, name, uid, record) under one of the
 * nkeys keys; 0 otherwise (NULL attest included). */
int sbx_authz_attest_check(const unsigned char *const *keys, const size_t *keylens, size_t nkeys, const char *ns,
			   const char *name, const char *uid, const char *record, const char *attest);

#endif
