/* Validation of a Sandbox spec (contract section 2): the .spec object as the
 * apiserver stores it, defaults applied. The controller re-checks here what
 * the CRD schema and the webhook already enforce, because a spec that reaches
 * the scope digest or a volume path unchecked could mount another tenant's
 * workspace. Also what is read from a spec: its lifecycle, its intent (the
 * spec without it) and resource quantities. */
#ifndef SBX_SANDBOX_SPEC_H
#define SBX_SANDBOX_SPEC_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

/* Longest idempotency key, in bytes. */
#define SBX_KEY_MAX 255
/* Longest workspace owner, in bytes (a DNS label). */
#define SBX_OWNER_MAX 63
/* The owner pattern, for messages. */
#define SBX_OWNER_PATTERN "^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$"

/* Most allow profiles a Sandbox names in spec.network.profiles, and the
 * longest name (a DNS label; sandbox/netprofile.h). */
#define SBX_PROFILES_MAX 8
#define SBX_PROFILE_NAME_MAX 63
/* The names of a set joined by "," (8 x 63 + 7 + NUL). */
#define SBX_PROFILES_JOINED_MAX (SBX_PROFILES_MAX * (SBX_PROFILE_NAME_MAX + 1))

/* Returns 1 iff owner matches SBX_OWNER_PATTERN ("" and NULL are invalid;
 * so are "..", "../x" and anything with a '/'). */
int sbx_owner_valid(const char *owner);

/* Returns 1 iff key is 1..SBX_KEY_MAX bytes of valid UTF-8 with no control
 * characters (C0, DEL, C1 U+0080..U+009F); NULL is invalid. */
int sbx_key_valid(const char *key);

/* Checks the whole spec: image a non-empty string (required); command and
 * args arrays of strings; env an array of {name: non-empty string, value:
 * string (optional)}; idempotencyKey and workspaceOwner, when present, strings
 * that pass the checks above (a present but empty owner is invalid, never "no
 * owner"); resources an object (limits/requests objects) and
 * runtimeClassName a non-empty string when present; lifecycle as
 * sbx_lifecycle_parse takes it; network as sbx_spec_profiles takes it
 * (sandbox/netprofile.h). Returns 0, or -1 with a
 * message naming the field in msg (size msglen). User values quoted in the
 * message are escaped to printable ASCII and shortened. Other members are
 * not refused: the CRD's structural schema prunes unknown fields, and the
 * fingerprint covers whatever is stored. */
int sbx_spec_validate(const cJSON *spec, char *msg, size_t msglen);

/* 1 iff name is a profile name: a DNS label of at most 63 bytes. */
int sbx_profile_name_ok(const char *name);

/* The profiles spec names: spec.network.profiles. Sets *n (0 when absent)
 * and names[0..n) (borrowed from spec; names has SBX_PROFILES_MAX slots).
 * Returns 0, or -1 with a message naming the field when network is not an
 * object of profiles alone, profiles is not a list of 1..SBX_PROFILES_MAX
 * distinct profile names. */
int sbx_spec_profiles(const cJSON *spec, const char **names, size_t *n, char *msg, size_t msglen);

/* The set of names[0..n): sorted, joined by "," into joined (size
 * SBX_PROFILES_JOINED_MAX), and the first 16 hex digits of its SHA-256
 * into hash. Returns 0, or -1 (a name too long, n too large). */
int sbx_profiles_set(const char *const *names, size_t n, char joined[SBX_PROFILES_JOINED_MAX], char hash[17]);

/* Splits joined (as sbx_profiles_set writes it, e.g. from a pod's
 * annotation) back into names: each a profile name, sorted, distinct.
 * Writes the names into buf (size SBX_PROFILES_JOINED_MAX) and pointers into
 * names; returns their number (>= 1), or -1 when joined is not such a set. */
int sbx_profiles_split(const char *joined, char buf[SBX_PROFILES_JOINED_MAX], const char **names);

/* Returns spec.workspaceOwner when it is a string member, else NULL (absent).
 * The pointer is borrowed from spec. */
const char *sbx_spec_owner(const cJSON *spec);

/* Returns spec.idempotencyKey when it is a string member, else NULL. The
 * pointer is borrowed from spec. */
const char *sbx_spec_key(const cJSON *spec);

/* spec.lifecycle (contract sections 2 and 5a), parsed: the one mutable part
 * of a spec. */
struct sbx_lifecycle {
	int has_shutdown;  /* shutdownTime present */
	time_t shutdown;   /* valid when has_shutdown */
	int delete_policy; /* shutdownPolicy Delete (absent or Retain: 0) */
	int suspend;	   /* suspend true */
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

/* Parses a Kubernetes quantity ("2", "500m", "4Gi", "1e3") into *out.
 * Returns 0, or -1 when s is NULL or not a quantity. */
int sbx_quantity_parse(const char *s, double *out);

#endif
