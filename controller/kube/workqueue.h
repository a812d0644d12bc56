/* A rate-limited work queue with controller-runtime semantics: a key is
 * never handed to two workers at once, a key queued many times before it is
 * processed is processed once, a key added while it is being processed is
 * queued again when its worker calls workqueue_done, delayed adds, and
 * per-key exponential backoff combined with an overall token bucket.
 *
 * An item is typed: a kind (0 .. WORKQUEUE_KINDS - 1, the caller's, e.g.
 * which reconcile it is for) and a string key ("namespace/name"). Items of
 * two kinds never meet, whatever their keys, and "key" below means the item.
 *
 * Fair by default: ready keys are served across namespaces (the part of the
 * key before '/', whatever the kind) in turn, one key per turn, and within a
 * namespace across its flows (the caller's, e.g. a workspace owner; "" when
 * none is given) in turn; a flow is a FIFO. A namespace or flow that had
 * nothing ready is served next when it gets a key, so a tenant's first key
 * never waits behind another tenant's backlog. Each lane (ordinary, low) is
 * fair on its own. workqueue_set_fifo makes it one FIFO (the baseline).
 * Thread-safe; getters block. */
#ifndef SBX_KUBE_WORKQUEUE_H
#define SBX_KUBE_WORKQUEUE_H

#include <stddef.h>

/* Kinds of items: 0 .. WORKQUEUE_KINDS - 1 (others count as 0). */
#define WORKQUEUE_KINDS 127
/* Namespaces are reported in this many buckets (bounded metrics). */
#define WORKQUEUE_NS_BUCKETS 16

/* The bucket of namespace ns: FNV-1a 32 of its bytes modulo
 * WORKQUEUE_NS_BUCKETS. */
int workqueue_ns_bucket(const char *ns);

struct workqueue;

/* What the queue reports to a metrics layer (client-go's workqueue metrics).
 * Each callback may be NULL; they run under the queue's lock, so they must be
 * quick and must not call into the queue. */
struct workqueue_metrics {
	void *ctx;
	void (*depth)(void *ctx, size_t depth);	   /* ready keys, after each change */
	void (*adds)(void *ctx);		   /* a key was queued (not a duplicate) */
	void (*retries)(void *ctx);		   /* a rate-limited requeue */
	void (*queued)(void *ctx, double seconds); /* add -> get */
	void (*worked)(void *ctx, double seconds); /* get -> done */
	/* Ready keys of the namespaces of one bucket, after each change. */
	void (*ns_depth)(void *ctx, int bucket, size_t depth);
	/* add -> get of a key of a namespace of that bucket. */
	void (*ns_queued)(void *ctx, int bucket, double seconds);
	/* Namespaces and flows with a ready key (both lanes), after each change. */
	void (*tenants)(void *ctx, size_t namespaces, size_t flows);
};

/* Returns a new queue (caller frees with workqueue_free). */
struct workqueue *workqueue_new(void);
/* Sets the metrics callbacks (copied); call before the queue is used. */
void workqueue_set_metrics(struct workqueue *q, const struct workqueue_metrics *m);
/* 1: one FIFO for every key (the order before fairness, for baselines); 0:
 * fair (the default). Call before the queue is used. */
void workqueue_set_fifo(struct workqueue *q, int fifo);
/* In fair order, the most keys of one namespace, and of one flow of it,
 * handed out and not done at once (0: no cap, the default): a tenant's burst
 * then holds that many workers, and the API calls they make, whatever its
 * backlog; its other keys wait their turn here, where the order is fair,
 * rather than in the API server's queues. Passed over while at its cap, a
 * namespace keeps its place. */
void workqueue_set_caps(struct workqueue *q, int per_namespace, int per_flow);
/* Caps while a tenant shares the queue (0: the caps above, always): a
 * namespace with more keys ready than its cap (a backlog) has a cap of at
 * most per_namespace while another namespace has keys ready or being
 * processed, or had one done within linger_ms; a flow with a backlog has at
 * most per_flow while another flow of its namespace does. A tenant alone
 * keeps its full caps (its throughput), and so does one whose keys fit in
 * them (a victim's handful); a backlogged one that shares holds fewer
 * workers, so another's calls meet fewer of its own at the API server. The
 * linger spans the gaps between a victim's keys. */
void workqueue_set_shared_caps(struct workqueue *q, int per_namespace, int per_flow, long linger_ms);
/* A rate while a tenant shares the queue (0 or less: none, the default): a
 * namespace or flow with a backlog, while it shares (as for the shared caps)
 * with one that has none (its ready keys fit in its cap: a victim's handful),
 * starts at most per_second keys a second, one at a time after the last; two
 * backlogs share by the caps alone. What
 * a victim meets at the API server is the busy tenant's calls per second,
 * not how many of its reconciles are in flight: short reconciles at a cap of
 * 2 still start a hundred a second. */
void workqueue_set_shared_rate(struct workqueue *q, double per_second);
/* Frees the queue; no thread may be inside a call on it. */
void workqueue_free(struct workqueue *q);
/* Queues key (copied) unless it is already waiting; after shutdown, ignored.
 * Its flow is the one it has in the queue (waiting, delayed or being
 * processed: a worker's re-add keeps it), else "". */
void workqueue_add(struct workqueue *q, int kind, const char *key);
/* workqueue_add in flow (copied; NULL: ""). A key already waiting keeps the
 * flow it has. */
void workqueue_add_flow(struct workqueue *q, int kind, const char *key, const char *flow);
/* workqueue_add_after in flow (NULL: the one it has, as workqueue_add). */
void workqueue_add_flow_after(struct workqueue *q, int kind, const char *key, const char *flow, long delay_ms);
/* Queues key after delay_ms (at once when <= 0). A key already waiting for a
 * later time is moved earlier; an earlier one is kept. */
void workqueue_add_after(struct workqueue *q, int kind, const char *key, long delay_ms);
/* workqueue_add_after into the low lane: when due, the key is handed out
 * only while no ordinary key is ready and fewer than the low limit of low
 * keys are being processed, so a burst of them (timers that fall due at
 * once) never delays ordinary work and is paced by that limit. An ordinary
 * add of the key moves it to the ordinary lane. */
void workqueue_add_after_low(struct workqueue *q, int kind, const char *key, long delay_ms);
/* How many low-lane keys may be processed at once (0: no limit, the
 * default). */
void workqueue_set_low_limit(struct workqueue *q, int max_concurrent);
/* Queues key after its rate-limited delay: max(5 ms * 2^failures capped at
 * 1000 s, the overall 10 qps / burst 100 bucket of the key's kind and
 * namespace, the part before '/'), and counts a failure. One bucket per kind
 * and namespace, so keys failing in one namespace never delay another's
 * retries. */
void workqueue_add_rate_limited(struct workqueue *q, int kind, const char *key);
/* workqueue_add_rate_limited, but never sooner than min_delay_ms (the API's
 * Retry-After) capped at the backoff's maximum (1000 s): a Retry-After of a
 * day (a webhook's retryAfterSeconds) does not park the key for a day. */
void workqueue_add_rate_limited_min(struct workqueue *q, int kind, const char *key, long min_delay_ms);
/* Computes and records the delay workqueue_add_rate_limited would use (the
 * failure count is incremented), in milliseconds. */
long workqueue_next_backoff_ms(struct workqueue *q, int kind, const char *key);
/* Number of overall buckets held (one per kind and namespace whose keys
 * failed recently). */
size_t workqueue_buckets(struct workqueue *q);
/* Resets the key's backoff (call after a successful reconcile). */
void workqueue_forget(struct workqueue *q, int kind, const char *key);
/* Number of rate-limited requeues of key since the last forget. */
int workqueue_num_requeues(struct workqueue *q, int kind, const char *key);
/* How long (ms; 0 once due) until key, added with a delay (add_after or a
 * rate-limited add), is queued; -1 when no delayed add of it is pending (it
 * was never added with one, is ready or being processed already, or the
 * queue is shut down). */
long workqueue_wait_ms(struct workqueue *q, int kind, const char *key);
/* Blocks until an item is ready and returns its key (caller frees, then
 * calls workqueue_done with its kind and key), its kind in *kind (NULL ok);
 * returns NULL once shut down. */
char *workqueue_get(struct workqueue *q, int *kind);
/* Marks key processed; if it was added meanwhile, it is queued again
 * (unless the queue is shut down). */
void workqueue_done(struct workqueue *q, int kind, const char *key);
/* Wakes all getters, and from now on workqueue_get returns NULL: keys ready
 * or delayed are never handed out (workers stop after the keys they hold,
 * not after the backlog: SIGTERM with thousands of keys queued would wait
 * for thousands of reconciles). The keys are derived state: whoever
 * reconciles next lists the objects again. */
void workqueue_shutdown(struct workqueue *q);
/* Number of keys ready to be handed out (due delayed keys included; keys
 * still waiting or being processed are not). */
size_t workqueue_len(struct workqueue *q);

#endif
