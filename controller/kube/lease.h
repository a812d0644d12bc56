/* Leader election on a coordination.k8s.io/v1 Lease, with client-go's
 * semantics: a lease held by another identity counts as expired only once its
 * record has not changed for leaseDuration as observed by this process (local
 * monotonic time; remote clocks are never trusted), and renewals retry every
 * retry period. Leadership is lost when no renewal succeeded within the renew
 * deadline, counted from the start of the last successful one: each request
 * of an attempt times out when the deadline comes (a hung connection cannot
 * stretch it), and lease_is_leader turns 0 at the deadline itself, even while
 * a request is in flight. A read that shows another identity holding a lease
 * that has not expired ends leadership at once. Its requests skip the
 * client's rate limit (kube_request_opts.unthrottled), so the client may be
 * the workers' own: a renewal never queues behind their requests. Knows
 * nothing about what the leader does. */
#ifndef SBX_KUBE_LEASE_H
#define SBX_KUBE_LEASE_H

#include "kube/client.h"

struct lease_opts {
	const char *ns;	      /* Lease namespace */
	const char *name;     /* Lease name */
	const char *identity; /* this replica, unique (hostname_random) */
	int lease_duration_s; /* default 15 */
	int renew_deadline_s; /* default 10 */
	int retry_period_s;   /* default 2 */
};

struct lease_elector;

/* Starts campaigning on a thread of its own. Returns the elector (caller frees
 * with lease_elector_free), or NULL when the thread cannot start. */
struct lease_elector *lease_elector_start(struct kube_client *c, const struct lease_opts *o);
/* 1 while this process holds the lease: 0 from the renew deadline on. */
int lease_is_leader(struct lease_elector *e);
/* 1 once leadership was held and then lost (the process should exit), from
 * the renew deadline on even before the lease thread has noticed. */
int lease_lost(struct lease_elector *e);
/* Stops campaigning (abandoning a request in flight); when leader, releases
 * the lease (empty holder) so another replica takes over at once, giving up
 * on that after one renew deadline. Then frees e. */
void lease_elector_free(struct lease_elector *e);

/* Pure decision, exposed for tests: may identity take the lease described by
 * holder/record, given that the record was last seen to change observed_ms
 * ago? 1 when the lease is free, ours, or expired. */
int lease_can_take(const char *holder, const char *identity, long long unchanged_ms, int lease_duration_s);

#endif
