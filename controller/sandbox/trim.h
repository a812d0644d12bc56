/* Trimmers for the informer caches: keep only what the reconcile reads, with
 * a bound on the size kept per object whatever the tenant wrote (README,
 * "Memory"). A Sandbox whose spec is too large to cache is kept without it,
 * with SBX_TRIM_OVERSIZED set to the spec's size, and is rejected. */
#ifndef SBX_SANDBOX_TRIM_H
#define SBX_SANDBOX_TRIM_H

#include <cjson/cJSON.h>

#define SBX_TRIM_OVERSIZED "oversizedSpecBytes"
/* Set (true) in a trimmed pod's metadata when it had more Sandbox owner
 * references than the cache keeps (256): who holds it is read live. */
#define SBX_TRIM_REFS_TRUNCATED "ownerReferencesTruncated"
/* A Sandbox spec larger than this is not cached (the Sandbox is rejected). */
#define SBX_SPEC_KEEP_MAX (64 * 1024)

/* Each returns a new trimmed copy (caller frees); never NULL. */
cJSON *sbx_trim_sandbox(const cJSON *obj);
cJSON *sbx_trim_pod(const cJSON *obj);
/* Preset dictionaries the caches deflate trimmed Sandboxes and pods against. */
extern const char sbx_sandbox_dictionary[];
extern const char sbx_pod_dictionary[];

#endif
