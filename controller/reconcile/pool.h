/* The warm pool's reconcile (contract section 8): keeps spec.replicas warm
 * pods of a SandboxWarmPool (what a warm pod is: sandbox/poolspec.h). */
#ifndef SBX_RECONCILE_POOL_H
#define SBX_RECONCILE_POOL_H

#include <time.h>

struct sbx_controller;

/* The pool's reconcile (the queue's pool items): authorizes its owner,
 * deletes outdated and extra warm pods, creates missing ones (never more
 * than replicas in flight, at the controller's refill rate) and writes its
 * status. Returns 0, a delay, or -1. */
int sbx_pool_reconcile(struct sbx_controller *c, const char *ns, const char *name);
/* The pool pods cache saw a pod of the pool uid appear: one expected create
 * fewer. */
void sbx_pool_seen(struct sbx_controller *c, const char *pool_uid);

/* The controller's pool bookkeeping: the refill bucket and the creates in
 * flight per pool (caller frees with sbx_pool_state_free). */
struct sbx_pool_state;
struct sbx_pool_state *sbx_pool_state_new(double refill_qps);
void sbx_pool_state_free(struct sbx_pool_state *s);
/* A pool of namespace ns left the cache at now. */
void sbx_pool_gone(struct sbx_pool_state *s, const char *ns, time_t now);
/* 1 when a pool of ns left the cache less than within_s seconds before now
 * (this process saw it). */
int sbx_pool_gone_within(struct sbx_pool_state *s, const char *ns, time_t now, long within_s);

#endif
