/* The warm refill budget, shared fairly (contract section 10; issue 23,
 * finding 4): one budget of `rate` warm pod creates per second (burst
 * `burst`) for every pool of the cluster, handed out in turns so that no
 * namespace, and within a namespace no pool, starves the others: each
 * namespace that wants a create now (asked within SBX_REFILL_ACTIVE_MS) gets
 * its turn before any other namespace takes more than one turn beyond it,
 * and the same among the pools of a namespace. A namespace or pool that was
 * not asking comes back at the turn of those that were (it never saved
 * turns up). A create the API refused gives its token back and its pool
 * leaves the turns (it backs off: reconcile/pool.c), so refused creates
 * never spend the budget of others. Time is passed in (a monotonic clock in
 * milliseconds), so the rule is tested without waiting. Thread-safe. */
#ifndef SBX_RECONCILE_REFILL_H
#define SBX_RECONCILE_REFILL_H

#include <stdint.h>

/* A pool that asked within this long wants a create now. */
#define SBX_REFILL_ACTIVE_MS 1000
/* Pools not heard of for this long are forgotten. */
#define SBX_REFILL_FORGET_MS 60000

struct sbx_refill;

/* Returns a new budget, full at now_ms (caller frees with sbx_refill_free). */
struct sbx_refill *sbx_refill_new(double rate, int burst, int64_t now_ms);
/* Frees r; NULL is a no-op. */
void sbx_refill_free(struct sbx_refill *r);
/* Pool (its uid) of namespace ns asks for one create at now_ms: 1 when it
 * may create one now, 0 when not (another namespace or pool is due first,
 * or the budget is spent: ask again shortly). */
int sbx_refill_take(struct sbx_refill *r, const char *ns, const char *pool, int64_t now_ms);
/* The create granted to pool was refused by the API: its token goes back
 * and the pool stops counting as asking. */
void sbx_refill_refund(struct sbx_refill *r, const char *ns, const char *pool);
/* The number of pools held (tests). */
int sbx_refill_pools(struct sbx_refill *r);

#endif
