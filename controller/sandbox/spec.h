/* Validation of a Sandbox spec (contract section 2): the .spec object as the
 * apiserver stores it, defaults applied. The controller re-checks here what
 * the CRD schema and the webhook already enforce, because a spec that reaches
 * the scope digest or a volume path unchecked could mount another tenant's
 * workspace. */
#ifndef SBX_SANDBOX_SPEC_H
#define SBX_SANDBOX_SPEC_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Longest idempotency key, in bytes. */
#define SBX_KEY_MAX 255
/* Longest workspace owner, in bytes (a DNS label). */
#define SBX_OWNER_MAX 63
/* The owner pattern, for messages. */
#define SBX_OWNER_PATTERN "^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$"

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
 * sbx_lifecycle_parse takes it. Returns 0, or -1 with a
 * message naming the field in msg (size msglen). User values quoted in the
 * message are escaped to printable ASCII and shortened. Other members are
 * not refused: the CRD's structural schema prunes unknown fields, and the
 * fingerprint covers whatever is stored. */
int sbx_spec_validate(const cJSON *spec, char *msg, size_t msglen);

/* Returns spec.workspaceOwner when it is a string member, else NULL (absent).
 * The pointer is borrowed from spec. */
const char *sbx_spec_owner(const cJSON *spec);

/* Returns spec.idempotencyKey when it is a string member, else NULL. The
 * pointer is borrowed from spec. */
const char *sbx_spec_key(const cJSON *spec);

#endif
