/* Warm pools (contract section 8; docs/api.md "Warm pools"): a
 * SandboxWarmPool keeps spec.replicas warm pods of one template and owner,
 * built exactly as a Sandbox's pod with that spec would be, so that a new
 * Sandbox of that template and owner is bound to one instead of waiting for
 * a pod (reconcile/warm.h binds them; reconcile/pool.h keeps the pods).
 *
 * A warm pod: name "sbx-w-<10 random>", labels managed-by, name and
 * sandbox.dev/pool: <pool uid> (and, when the template names allow
 * profiles, their label and annotation, as a Sandbox's pod of that spec:
 * sandbox/netprofile.h); annotations sandbox.dev/workspace-owner (with
 * an owner), sandbox.dev/template-fingerprint, sandbox.dev/claimed-at (its
 * creation) and sandbox.dev/seal, the pod seal over (namespace, name,
 * "pool/<uid>", owner, template fingerprint, claimed-at); owned by the pool
 * (the garbage collector takes its pods with it). Admission reserves the
 * name and every label and annotation under sandbox.dev/ to the controller. */
#ifndef SBX_SANDBOX_POOLSPEC_H
#define SBX_SANDBOX_POOLSPEC_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "sandbox/api.h"
#include "sandbox/authz.h"
#include "sandbox/config.h"
#include "sandbox/seal.h"
#include "sandbox/spec.h"

#define SBX_POOL_KIND "SandboxWarmPool"
#define SBX_POOL_PLURAL "sandboxwarmpools"
#define SBX_LABEL_POOL "sandbox.dev/pool"
#define SBX_ANN_TEMPLATE_FP "sandbox.dev/template-fingerprint"
#define SBX_WARM_PREFIX "sbx-w-"
/* The authorization record of a pool names "pool:" + its name (a name
 * cannot hold ':'), so a pool's record never verifies for a Sandbox. */
#define SBX_POOL_AUTHZ_PREFIX "pool:"
/* The status member where the controller notes that the pool's record was
 * made while the webhook was in force (sandbox/authz.h, sbx_authz_attest). */
#define SBX_POOL_ATTESTED "ownerAuthorizationVerified"

/* The pool cache is indexed by namespace: the trimmer sets this label of
 * the cached copy to the pool's namespace. */
#define SBX_POOL_NS_INDEX "sandbox.dev/pool-namespace"

/* Largest pool spec the cache keeps (a larger one is treated as invalid). */
#define SBX_SPEC_POOL_KEEP_MAX (64 * 1024)
/* The informer's trimmer for pools: identity, generation, the owner's and
 * the profiles' authorization annotations (the recorded identity up to
 * SBX_AUTHZ_IDENTITY_MAX bytes), spec and status, each bounded. Returns a new
 * object (caller frees); never NULL. */
cJSON *sbx_pool_trim(const cJSON *obj);

/* The spec a pool's warm pods are built from: spec.template with
 * spec.workspaceOwner (when set), as a new object (caller frees); NULL when
 * the pool has no template object. */
cJSON *sbx_pool_spec(const cJSON *pool);

/* The warm pod pod_name of pool (ns, name, uid) for spec (sbx_pool_spec)
 * whose template fingerprint is fp, created at created_at (RFC 3339), sealed
 * with keys' newest key (caller frees); NULL when the builder refuses. */
cJSON *sbx_pool_pod_build(const struct sbx_config *cfg, const struct sbx_seal_keys *keys, const char *ns,
			  const char *pool_name, const char *pool_uid, const char *pod_name, const cJSON *spec,
			  const char *fp, const char *created_at);

/* 1 when pod (full or trimmed) is a sealed member of the pool with uid
 * pool_uid: the labels, the template fingerprint fp and the owner (NULL:
 * none) as given, its seal by one of keys, not being deleted. */
int sbx_pool_member(const cJSON *pod, const struct sbx_seal_keys *keys, const char *pool_uid, const char *fp,
		    const char *owner);

/* The record of the `use` of the network profiles pool's template names
 * (spec.template.network.profiles; the admission webhook writes it in
 * sandbox.dev/network-authorization): the record format of sandbox/authz.h
 * for namespace, "pool:<name>", "network-profiles:<sorted names>", the
 * template fingerprint fp, sandbox.dev/requested-by and the identity
 * recorded. Sets *n (0: the template names none) and joined (the sorted
 * names by ","). SBX_AUTHZ_OK when it verifies under one of the nkeys keys
 * (info filled, NULL ok) or the template names none; SBX_AUTHZ_MALFORMED
 * when its network is invalid (*n 0); else what is wrong with the record. */
enum sbx_authz_check sbx_pool_profiles_verify(const unsigned char *const *keys, const size_t *keylens, size_t nkeys,
					      const cJSON *pool, const char *fp, char joined[SBX_PROFILES_JOINED_MAX],
					      size_t *n, struct sbx_authz_info *info);

/* 1 when pod (full or trimmed) is an untaken warm pod (named SBX_WARM_PREFIX,
 * labelled SBX_LABEL_POOL, not being deleted) that no pool owns: no owner
 * reference of kind SBX_POOL_KIND (its pool was deleted with its dependents
 * orphaned, or the reference removed). Only the controller deletes it. */
int sbx_pool_orphaned(const cJSON *pod);

/* 1 when pod (full or trimmed) is Running and Ready. */
int sbx_pool_pod_ready(const cJSON *pod);

/* Writes a fresh warm pod name ("sbx-w-" and 10 random characters) into
 * out (32 bytes). Returns 0, or -1 without randomness. */
int sbx_pool_pod_name(char out[32]);

#endif
