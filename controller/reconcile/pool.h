/* The warm pool's reconcile (contract section 8): keeps spec.replicas warm
 * pods of a SandboxWarmPool (what a warm pod is: sandbox/poolspec.h). */
#ifndef SBX_RECONCILE_POOL_H
#define SBX_RECONCILE_POOL_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

struct sbx_controller;

/* The pool's reconcile (the queue's pool items): authorizes its owner,
 * deletes outdated and extra warm pods, creates missing ones (never more
 * than replicas in flight, at the controller's refill rate) and writes its
 * status; a pool being deleted (a finalizer may hold it) only has its warm
 * pods deleted. Returns 0, a delay, or -1. */
int sbx_pool_reconcile(struct sbx_controller *c, const char *ns, const char *name);
/* The queue's orphan items: deletes the warm pod name of ns when, read
 * live, no pool owns it any more (sbx_pool_orphaned: its pool deleted with
 * its dependents orphaned), guarded by its uid and resourceVersion, so a
 * pod a warm bind took meanwhile is never deleted. 0, a delay, or -1. */
int sbx_pool_collect_orphan(struct sbx_controller *c, const char *ns, const char *name);
/* Whether the owner of pool (a cached SandboxWarmPool) whose template
 * fingerprint is fp may be mounted now: its owner authorization record
 * verifies (a record of the template and owner as they are now, by the
 * identity that set them), the admission webhook was in force for it, and
 * that identity may still use the owner (reconcile/reauthz.h; asked anew
 * when fresh, else a kept answer may do). Whether the webhook was in force
 * is judged once: a pool whose status carries the controller's note of it
 * (sandbox/authz.h, sbx_authz_attest) for its record is not judged again on
 * the configuration as it is now; into attest (65 bytes, NULL ok) goes the
 * note to keep ("" when the record does not count). The same holds for the
 * record of the allow profiles its template names (sandbox/poolspec.h,
 * sbx_pool_profiles_verify), whatever the owner mode; each must still exist
 * and its author may still `use` each. 1 yes (also without an owner, or
 * with ownerAuthorization namespace, and no profiles); 0 no, with why and
 * *reason (NULL ok: OwnerNotAuthorized, NetworkProfileNotAuthorized or
 * NetworkProfileNotFound); -1 when that cannot be told now, with why. */
int sbx_pool_authorized(struct sbx_controller *c, const cJSON *pool, const char *fp, const char *owner, int fresh,
			char *why, size_t whylen, char attest[65], const char **reason);
/* The pool pods cache saw a pod of the pool uid appear: one expected create
 * fewer. */
void sbx_pool_seen(struct sbx_controller *c, const char *pool_uid);

/* The controller's pool bookkeeping: the refill bucket and the creates in
 * flight per pool (caller frees with sbx_pool_state_free). */
struct sbx_pool_state;
struct sbx_pool_state *sbx_pool_state_new(double refill_qps);
void sbx_pool_state_free(struct sbx_pool_state *s);
/* A pool of namespace ns left the cache at now. Namespaces whose pool left
 * keep_s or longer before now (keep_s: the longest within_s asked of
 * sbx_pool_gone_within) are forgotten. */
void sbx_pool_gone(struct sbx_pool_state *s, const char *ns, time_t now, long keep_s);
/* Number of namespaces held as gone. */
size_t sbx_pool_gone_held(struct sbx_pool_state *s);
/* 1 when this process has seen pool uid with the template fingerprint fp,
 * without another in between, for at least settle_ms on its own monotonic
 * clock (a call with another fingerprint, or the first call, starts that
 * clock; one clock per pool): then every replica's current cache has seen
 * the pool with that template too, whatever the replicas' wall clocks say
 * (docs/api.md, "The atomic warm claim"). */
int sbx_pool_settled(struct sbx_pool_state *s, const char *uid, const char *fp, long settle_ms);
/* Number of settle clocks held (one per pool seen and not forgotten). */
size_t sbx_pool_seen_held(struct sbx_pool_state *s);
/* A warm pod of namespace ns came into (d 1) or left (d -1) the cache of
 * pool members. */
void sbx_pool_warm_pod(struct sbx_pool_state *s, const char *ns, int d);
/* Pool uid left the cache: what was kept of it goes. */
void sbx_pool_forget(struct sbx_pool_state *s, const char *uid);
/* 1 when a pool of ns left the cache less than within_s seconds before now
 * (this process saw it), or while warm pods (pool members) remain in ns: a
 * pool that left before this process started is never seen to leave, but
 * its warm pods are, and only while one exists can a replica that still
 * sees the pool bind it. */
int sbx_pool_gone_within(struct sbx_pool_state *s, const char *ns, time_t now, long within_s);

#endif
