#include "kube/workqueue.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>
#include <utlist.h>

#include "base/fnv.h"
#include "base/ktime.h"
#include "base/xmalloc.h"
#include "kube/ratelimit.h"

#define BACKOFF_BASE_MS 5
#define BACKOFF_MAX_MS (1000L * 1000)
#define BUCKET_QPS 10.0
#define BUCKET_BURST 100
/* The longest a ready low-lane key waits behind ordinary ones (pop_locked). */
#define LOW_FLOOR_MS 250

struct node;

struct member { /* an element of the dirty and processing sets */
	char *key;
	char *flow;	   /* the item's flow within its namespace (an owner); "" by default */
	int64_t since_us;  /* dirty: when queued; processing: when handed out */
	int low;	   /* dirty: in the low lane; processing: handed out from it */
	struct node *node; /* dirty: its place among the ready keys, or NULL (being processed) */
	UT_hash_handle hh;
};

/* The ready keys. Each lane serves its namespaces in turn, and within a
 * namespace its flows in turn, one key per turn; a flow is a FIFO. A
 * namespace (or flow) with nothing ready leaves; one that gets a key again
 * is fresh: fresh ones are served before the ring, first come first served,
 * each once, then join the ring's end (FQ-CoDel's new and old flows). So an
 * idle tenant's first key waits behind no other tenant's backlog, and a
 * backlogged one is served once per round. In FIFO order
 * (workqueue_set_fifo) every key is in one namespace's one flow. */
struct flow;
struct tenant;
struct lane;

struct node {
	char *key;
	struct flow *f;
	struct node *prev, *next; /* the flow's FIFO (utlist DL) */
};

struct flow {
	char *name;
	struct tenant *t;
	struct node *head;	  /* utlist DL: head->prev is the tail */
	size_t len;		  /* its ready keys */
	int in_fresh;		  /* in t->fresh, else in the ring t->cur */
	struct flow *prev, *next; /* t->fresh (utlist DL) or the ring (utlist CDL) */
	UT_hash_handle hh;	  /* t->flows, by name */
};

struct tenant {
	char *ns;
	int bucket; /* workqueue_ns_bucket(ns) */
	struct lane *l;
	struct flow *flows;	    /* by name */
	struct flow *fresh;	    /* fresh flows, oldest first */
	struct flow *cur;	    /* the ring, at the flow served next */
	size_t len;		    /* its ready keys */
	int in_fresh;		    /* in l->fresh, else in the ring l->cur */
	struct tenant *prev, *next; /* l->fresh (utlist DL) or the ring (utlist CDL) */
	UT_hash_handle hh;	    /* l->tenants, by namespace */
};

struct lane {
	struct tenant *tenants; /* by namespace */
	struct tenant *fresh;	/* fresh namespaces, oldest first */
	struct tenant *cur;	/* the ring, at the namespace served next */
	size_t len, nflows;
	int64_t since_ms; /* when len last went from 0 to 1 */
};

struct delayed {
	char *key;
	char *flow;
	int64_t ready_ms;
	int low;    /* due into the low lane */
	size_t pos; /* index in the heap */
	UT_hash_handle hh;
};

struct failure {
	char *key;
	int n;
	UT_hash_handle hh;
};

/* The overall token bucket of one namespace (the part of a key before '/'):
 * a namespace full of failing keys uses up its own budget, not another's. */
struct ns_bucket {
	char *ns;
	struct token_bucket tb;
	UT_hash_handle hh;
};

/* Keys being processed, per namespace or per namespace and flow. With a
 * linger (workqueue_set_shared_caps), an entry whose last key is done stays
 * that long at n 0, on its set's linger list (oldest first), so the tenant
 * still counts as sharing the queue between two of its keys. */
struct active {
	char *id; /* the namespace, or "<namespace>\x1f<flow>" */
	int n;
	int nflows;		    /* a namespace's: its flows' entries */
	int64_t done_ms;	    /* n 0: when its last key was done */
	int64_t started_ms;	    /* when its last key was handed out */
	struct active *prev, *next; /* the linger list (utlist DL) while n is 0 */
	UT_hash_handle hh;
};

/* A set of active entries and its linger list. */
struct active_set {
	struct active *by_id;
	struct active *linger;
};

struct workqueue {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct lane ord, low; /* ordinary adds; the low lane (workqueue_add_after_low) */
	size_t len;	      /* ready keys, both lanes */
	size_t bucket_depth[WORKQUEUE_NS_BUCKETS];
	int fifo;
	int low_active, low_max; /* low keys being processed, and the cap (0: none) */
	int64_t low_served_ms;	 /* when the low lane last had a key */
	/* Keys one namespace, and one flow of it, may have processed at once
	 * (0: no cap; fair order only), and how many they have. */
	int cap_ns, cap_flow;
	int shared_ns, shared_flow; /* the caps while shared (0: the caps above) */
	long shared_gap_ms;	    /* while shared, between two starts (0: none) */
	/* Set by get for each pass over the lanes: */
	int64_t pass_ms;  /* its clock */
	int64_t gap_over; /* the earliest a key held by the gap may go (-1: none) */
	int sparse_ns;	  /* with a gap: a namespace without a backlog has work */
	long linger_ms;
	struct active_set active_ns, active_flow;
	struct member *dirty, *processing;
	struct delayed *waiting; /* by key */
	struct delayed **heap;	 /* min-heap on ready_ms */
	size_t nheap, capheap;
	struct failure *failures;  /* guarded by mu too */
	struct ns_bucket *buckets; /* guarded by mu too; one per namespace that failed lately */
	int64_t buckets_walked_ms; /* the last forget_full_buckets walk */
	int shutting_down;
	struct workqueue_metrics m;
};

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int workqueue_ns_bucket(const char *ns)
{
	return (int)(fnv1a(FNV1A_START, ns) % WORKQUEUE_NS_BUCKETS);
}

static struct member *set_find(struct member *s, const char *key)
{
	struct member *m;
	HASH_FIND_STR(s, key, m);
	return m;
}

/* ---- sets ---- */

static int set_has(struct member *s, const char *key)
{
	struct member *m;
	HASH_FIND_STR(s, key, m);
	return m != NULL;
}

static struct member *set_add(struct member **s, const char *key, const char *flow, int64_t since_us)
{
	struct member *m = xcalloc(1, sizeof *m);
	m->key = xstrdup(key);
	m->flow = xstrdup(flow ? flow : "");
	m->since_us = since_us;
	HASH_ADD_KEYPTR(hh, *s, m->key, strlen(m->key), m);
	return m;
}

static void member_free(struct member *m)
{
	free(m->key);
	free(m->flow);
	free(m);
}

/* Removes key; returns 1 if it was present. */
static int set_del(struct member **s, const char *key)
{
	struct member *m;
	HASH_FIND_STR(*s, key, m);
	if (!m)
		return 0;
	HASH_DEL(*s, m);
	member_free(m);
	return 1;
}

static void set_clear(struct member **s)
{
	struct member *m, *t;
	HASH_ITER(hh, *s, m, t)
	{
		HASH_DEL(*s, m);
		member_free(m);
	}
}

/* ---- the delay heap (caller holds mu) ---- */

static void heap_swap(struct workqueue *q, size_t a, size_t b)
{
	struct delayed *t = q->heap[a];
	q->heap[a] = q->heap[b];
	q->heap[b] = t;
	q->heap[a]->pos = a;
	q->heap[b]->pos = b;
}

static void heap_up(struct workqueue *q, size_t i)
{
	while (i > 0 && q->heap[(i - 1) / 2]->ready_ms > q->heap[i]->ready_ms) {
		heap_swap(q, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void heap_down(struct workqueue *q, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < q->nheap && q->heap[l]->ready_ms < q->heap[m]->ready_ms)
			m = l;
		if (r < q->nheap && q->heap[r]->ready_ms < q->heap[m]->ready_ms)
			m = r;
		if (m == i)
			return;
		heap_swap(q, i, m);
		i = m;
	}
}

/* Removes and returns the earliest delayed item. */
static struct delayed *heap_pop(struct workqueue *q)
{
	struct delayed *d = q->heap[0];
	q->nheap--;
	if (q->nheap) {
		q->heap[0] = q->heap[q->nheap];
		q->heap[0]->pos = 0;
		heap_down(q, 0);
	}
	HASH_DEL(q->waiting, d);
	return d;
}

static void delayed_free(struct delayed *d)
{
	free(d->key);
	free(d->flow);
	free(d);
}

/* ---- the ready keys (caller holds mu) ---- */

/* The namespace of a queue key (after its kind byte, before '/'; "" without
 * one) into out; a key's kind does not matter to its turn. */
static void ns_of(const char *qkey, char *out, size_t n)
{
	const char *k = qkey[0] ? qkey + 1 : qkey, *slash = strchr(k, '/');
	size_t len = slash ? (size_t)(slash - k) : 0;
	if (len >= n)
		len = n - 1;
	memcpy(out, k, len);
	out[len] = '\0';
}

/* The id of flow f of namespace ns for the active counts, into out. */
static void flow_id(const char *ns, const char *f, char *out, size_t n)
{
	snprintf(out, n, "%s\x1f%s", ns, f);
}

/* The namespace of a flow's id (flow_id) into out. */
static void flow_ns(const char *id, char *out, size_t n)
{
	size_t len = strcspn(id, "\x1f");
	if (len >= n)
		len = n - 1;
	memcpy(out, id, len);
	out[len] = '\0';
}

static struct active *active_find(const struct active_set *set, const char *id)
{
	struct active *a;
	HASH_FIND_STR(set->by_id, id, a);
	return a;
}

/* Drops a (n 0) from set; a flow's entry leaves its namespace's count. */
static void active_drop(struct workqueue *q, struct active_set *set, struct active *a)
{
	if (set == &q->active_flow) {
		char ns[256];
		flow_ns(a->id, ns, sizeof ns);
		struct active *na = active_find(&q->active_ns, ns);
		if (na)
			na->nflows--;
	}
	if (a->done_ms >= 0)
		DL_DELETE(set->linger, a);
	HASH_DEL(set->by_id, a);
	free(a->id);
	free(a);
}

/* Moves the active count of id by d; an entry at 0 lingers (or is dropped
 * without a linger). */
static void active_add(struct workqueue *q, struct active_set *set, const char *id, int d, int64_t now)
{
	struct active *a = active_find(set, id);
	if (!a) {
		if (d <= 0)
			return;
		a = xcalloc(1, sizeof *a);
		a->id = xstrdup(id);
		a->done_ms = -1;
		HASH_ADD_KEYPTR(hh, set->by_id, a->id, strlen(a->id), a);
		if (set == &q->active_flow) {
			char ns[256];
			flow_ns(id, ns, sizeof ns);
			struct active *na = active_find(&q->active_ns, ns);
			if (na)
				na->nflows++;
		}
	}
	if (a->done_ms >= 0 && d > 0) { /* busy again */
		DL_DELETE(set->linger, a);
		a->done_ms = -1;
	}
	if (d > 0)
		a->started_ms = now;
	a->n += d;
	if (a->n > 0)
		return;
	a->n = 0;
	if (!q->linger_ms) {
		active_drop(q, set, a);
	} else if (a->done_ms < 0) {
		a->done_ms = now;
		DL_APPEND(set->linger, a);
	}
}

/* Drops the entries whose linger is over: flows first, so a namespace's
 * flow count never outlives it. Returns when the next one is over (-1:
 * none lingers). */
static int64_t active_expire(struct workqueue *q, int64_t now)
{
	struct active_set *sets[] = { &q->active_flow, &q->active_ns };
	int64_t next = -1;
	for (size_t i = 0; i < 2; i++) {
		struct active *a;
		while ((a = sets[i]->linger) && a->done_ms + q->linger_ms <= now)
			active_drop(q, sets[i], a);
		if (a && (next < 0 || a->done_ms + q->linger_ms < next))
			next = a->done_ms + q->linger_ms;
	}
	return next;
}

static void active_clear(struct active_set *set)
{
	struct active *a, *t;
	HASH_ITER(hh, set->by_id, a, t)
	{
		HASH_DEL(set->by_id, a);
		free(a->id);
		free(a);
	}
	set->linger = NULL;
}

/* A cap, or the shared one when shared and lower (0: no cap). */
static int cap_of(int cap, int shared_cap, int shared)
{
	if (!shared || !shared_cap)
		return cap;
	return cap && cap < shared_cap ? cap : shared_cap;
}

/* 1 when entry a (shared) started a key less than the shared gap ago; notes
 * when the gap is over, for get's wait. */
static int in_gap(struct workqueue *q, const struct active *a, int shared)
{
	if (!shared || !q->shared_gap_ms || !a || q->pass_ms - a->started_ms >= q->shared_gap_ms)
		return 0;
	int64_t over = a->started_ms + q->shared_gap_ms;
	if (q->gap_over < 0 || over < q->gap_over)
		q->gap_over = over;
	return 1;
}

/* With a shared rate: 1 when a namespace without a backlog (its ready keys
 * fit in its cap) has work, ready, being processed or lingering: a victim's
 * handful. Backlogs among themselves share by the caps alone: the rate is
 * for the small tenants' calls, and would hold two bursts to it each. */
static int sparse_ns_has_work(struct workqueue *q)
{
	struct tenant *t, *ttmp;
	HASH_ITER(hh, q->ord.tenants, t, ttmp)
	{
		if (q->cap_ns && t->len <= (size_t)q->cap_ns)
			return 1;
	}
	struct active *a, *atmp;
	HASH_ITER(hh, q->active_ns.by_id, a, atmp)
	{
		HASH_FIND_STR(q->ord.tenants, a->id, t);
		if (!t)
			return 1; /* being processed or lingering, nothing ready */
	}
	return 0;
}

/* The same among the flows of namespace t other than f (f's entry fa, t's
 * na): a ready flow that fits in its cap, or more other flows active than
 * there are other backlogged flows (a backlogged flow is ready, so one
 * active flow at least is not). */
static int sparse_flow_has_work(const struct workqueue *q, const struct tenant *t, const struct flow *f,
				const struct active *na, const struct active *fa)
{
	int backlogged = 0;
	struct flow *g, *tmp;
	HASH_ITER(hh, t->flows, g, tmp)
	{
		if (g == f)
			continue;
		if (q->cap_flow && g->len <= (size_t)q->cap_flow)
			return 1;
		backlogged++;
	}
	return (na ? na->nflows : 0) - (fa != NULL) > backlogged;
}

/* 1 when a key of flow f of namespace t may be handed out under the caps:
 * the shared ones while another namespace (for t) or another flow of t (for
 * f) has keys ready, being processed or lingering, and t (f) has a backlog,
 * more keys ready than its full cap; and, with a shared rate while a tenant
 * without a backlog has work, only once its last start is the gap ago. A
 * tenant whose keys fit in its cap (a victim's handful) keeps it: sharing
 * holds back bursts, not small tenants (FQ-CoDel's sparse flows). */
static int under_caps(struct workqueue *q, const struct tenant *t, const struct flow *f)
{
	if (q->fifo)
		return 1;
	struct active *na = active_find(&q->active_ns, t->ns);
	int in_ord = t->l == &q->ord;
	int ns_shared = (q->shared_ns || q->shared_gap_ms) && (!q->cap_ns || t->len > (size_t)q->cap_ns) &&
			(HASH_COUNT(q->ord.tenants) > (unsigned)in_ord ||
			 HASH_COUNT(q->active_ns.by_id) > (unsigned)(na != NULL));
	int cap = cap_of(q->cap_ns, q->shared_ns, ns_shared);
	if ((cap && na && na->n >= cap) || in_gap(q, na, ns_shared && q->sparse_ns))
		return 0;
	char id[512];
	flow_id(t->ns, f->name, id, sizeof id);
	struct active *fa = active_find(&q->active_flow, id);
	int flow_shared = (q->shared_flow || q->shared_gap_ms) && (!q->cap_flow || f->len > (size_t)q->cap_flow) &&
			  (HASH_COUNT(t->flows) > 1 || (na ? na->nflows : 0) - (fa != NULL) > 0);
	cap = cap_of(q->cap_flow, q->shared_flow, flow_shared);
	if (cap && fa && fa->n >= cap)
		return 0;
	return !in_gap(q, fa, flow_shared && q->shared_gap_ms && sparse_flow_has_work(q, t, f, na, fa));
}

static void report_depth(struct workqueue *q, int bucket)
{
	if (q->m.depth)
		q->m.depth(q->m.ctx, q->len);
	if (q->m.ns_depth)
		q->m.ns_depth(q->m.ctx, bucket, q->bucket_depth[bucket]);
	if (q->m.tenants)
		q->m.tenants(q->m.ctx, (size_t)HASH_COUNT(q->ord.tenants) + (size_t)HASH_COUNT(q->low.tenants),
			     q->ord.nflows + q->low.nflows);
}

/* Readies key in its lane: at the end of its flow, the flow and its
 * namespace joining their rings just before the cursors when new. */
static struct node *push_locked(struct workqueue *q, const char *key, const char *flow, int low)
{
	struct lane *l = low ? &q->low : &q->ord;
	char ns[256];
	ns_of(key, ns, sizeof ns);
	const char *fname = flow ? flow : "";
	if (q->fifo)
		ns[0] = '\0', fname = "";
	struct tenant *t;
	HASH_FIND_STR(l->tenants, ns, t);
	if (!t) {
		t = xcalloc(1, sizeof *t);
		t->ns = xstrdup(ns);
		t->bucket = workqueue_ns_bucket(ns);
		t->l = l;
		HASH_ADD_KEYPTR(hh, l->tenants, t->ns, strlen(t->ns), t);
		t->in_fresh = 1;
		DL_APPEND(l->fresh, t);
	}
	struct flow *f;
	HASH_FIND_STR(t->flows, fname, f);
	if (!f) {
		f = xcalloc(1, sizeof *f);
		f->name = xstrdup(fname);
		f->t = t;
		HASH_ADD_KEYPTR(hh, t->flows, f->name, strlen(f->name), f);
		f->in_fresh = 1;
		DL_APPEND(t->fresh, f);
		l->nflows++;
	}
	struct node *n = xcalloc(1, sizeof *n);
	n->key = xstrdup(key);
	n->f = f;
	DL_APPEND(f->head, n);
	f->len++;
	f->t->len++;
	if (l->len++ == 0)
		l->since_ms = ktime_mono_ms();
	q->len++;
	q->bucket_depth[t->bucket]++;
	report_depth(q, t->bucket);
	pthread_cond_signal(&q->cv);
	return n;
}

/* Takes n out of its flow (caller frees it); an emptied flow leaves its
 * namespace and an emptied namespace its lane. */
static void unlink_locked(struct workqueue *q, struct node *n)
{
	struct flow *f = n->f;
	struct tenant *t = f->t;
	struct lane *l = t->l;
	DL_DELETE(f->head, n);
	f->len--;
	f->t->len--;
	l->len--;
	q->len--;
	q->bucket_depth[t->bucket]--;
	int bucket = t->bucket;
	if (!f->head) {
		if (f->in_fresh)
			DL_DELETE(t->fresh, f);
		else
			CDL_DELETE(t->cur, f); /* the cursor moves on when it was f */
		HASH_DEL(t->flows, f);
		free(f->name);
		free(f);
		l->nflows--;
		if (!t->cur && !t->fresh) {
			if (t->in_fresh)
				DL_DELETE(l->fresh, t);
			else
				CDL_DELETE(l->cur, t);
			HASH_DEL(l->tenants, t);
			free(t->ns);
			free(t);
		}
	}
	report_depth(q, bucket);
}

/* The flow of t whose key goes next under the caps (NULL: none): fresh
 * flows first, then the ring from its cursor. */
static struct flow *eligible_flow(struct workqueue *q, struct tenant *t)
{
	struct flow *f;
	DL_FOREACH(t->fresh, f)
	{
		if (under_caps(q, t, f))
			return f;
	}
	if ((f = t->cur)) {
		do {
			if (under_caps(q, t, f))
				return f;
		} while ((f = f->next) != t->cur);
	}
	return NULL;
}

/* Takes the first key of flow f of namespace t out (caller frees the node):
 * a fresh flow or namespace joins its ring's end, a ring's cursor moves past
 * the one served. */
static struct node *serve(struct workqueue *q, struct lane *l, struct tenant *t, struct flow *f, int *bucket)
{
	struct node *n = f->head;
	*bucket = t->bucket;
	if (f->in_fresh) {
		DL_DELETE(t->fresh, f);
		f->in_fresh = 0;
		CDL_APPEND(t->cur, f);
	} else {
		t->cur = f->next;
	}
	if (t->in_fresh) {
		DL_DELETE(l->fresh, t);
		t->in_fresh = 0;
		CDL_APPEND(l->cur, t);
	} else {
		l->cur = t->next;
	}
	unlink_locked(q, n);
	return n;
}

/* The next key of lane l in turn (NULL: none), taken out (caller frees the
 * node). Namespaces and flows at their cap are passed over: they keep their
 * place, and their turn comes again when one of their keys is done. */
static struct node *pop_lane(struct workqueue *q, struct lane *l, int *bucket)
{
	struct tenant *t;
	struct flow *f;
	DL_FOREACH(l->fresh, t)
	{
		if ((f = eligible_flow(q, t)))
			return serve(q, l, t, f, bucket);
	}
	if ((t = l->cur)) {
		do {
			if ((f = eligible_flow(q, t)))
				return serve(q, l, t, f, bucket);
		} while ((t = t->next) != l->cur);
	}
	return NULL;
}

static void free_lane(struct lane *l)
{
	struct tenant *t, *tt;
	HASH_ITER(hh, l->tenants, t, tt)
	{
		struct flow *f, *ft;
		HASH_ITER(hh, t->flows, f, ft)
		{
			for (struct node *n = f->head, *nn; n; n = nn) {
				nn = n->next;
				free(n->key);
				free(n);
			}
			HASH_DEL(t->flows, f);
			free(f->name);
			free(f);
		}
		HASH_DEL(l->tenants, t);
		free(t->ns);
		free(t);
	}
	memset(l, 0, sizeof *l);
}

/* ---- core (caller holds mu) ---- */

/* The flow an item has in the queue (waiting, delayed or being processed),
 * or "" (borrowed; valid while mu is held and nothing changes). */
static const char *known_flow(struct workqueue *q, const char *key)
{
	struct member *m = set_find(q->dirty, key);
	if (!m)
		m = set_find(q->processing, key);
	if (m)
		return m->flow;
	struct delayed *d;
	HASH_FIND_STR(q->waiting, key, d);
	return d ? d->flow : "";
}

/* Queues key in a lane and flow (NULL: the one it has); an ordinary add of a
 * key waiting in the low lane moves it to the ordinary one. */
static void add_locked(struct workqueue *q, const char *key, const char *flow, int low)
{
	if (q->shutting_down)
		return;
	struct member *dm = set_find(q->dirty, key);
	if (dm) {
		if (dm->low && !low) {
			dm->low = 0;
			if (dm->node) {
				unlink_locked(q, dm->node);
				free(dm->node->key);
				free(dm->node);
				dm->node = push_locked(q, key, dm->flow, 0);
			}
		}
		return;
	}
	dm = set_add(&q->dirty, key, flow ? flow : known_flow(q, key), mono_us());
	dm->low = low;
	if (q->m.adds)
		q->m.adds(q->m.ctx);
	if (set_has(q->processing, key))
		return; /* queued again by workqueue_done */
	dm->node = push_locked(q, key, dm->flow, low);
}

/* Moves every delayed item that is due into the queue. */
static void promote_due(struct workqueue *q, int64_t now)
{
	while (q->nheap && q->heap[0]->ready_ms <= now) {
		struct delayed *d = heap_pop(q);
		add_locked(q, d->key, d->flow, d->low);
		delayed_free(d);
	}
}

static void drop_delayed(struct workqueue *q)
{
	while (q->nheap)
		delayed_free(heap_pop(q));
}

/* ---- public ---- */

static void add_after(struct workqueue *q, const char *key, const char *flow, long delay_ms, int low);

struct workqueue *workqueue_new(void)
{
	struct workqueue *q = xcalloc(1, sizeof *q);
	pthread_mutex_init(&q->mu, NULL);
	ktime_cond_init(&q->cv);
	return q;
}

void workqueue_set_shared_caps(struct workqueue *q, int per_namespace, int per_flow, long linger_ms)
{
	pthread_mutex_lock(&q->mu);
	q->shared_ns = per_namespace > 0 ? per_namespace : 0;
	q->shared_flow = per_flow > 0 ? per_flow : 0;
	q->linger_ms = linger_ms > 0 ? linger_ms : 0;
	pthread_mutex_unlock(&q->mu);
}

void workqueue_set_caps(struct workqueue *q, int per_namespace, int per_flow)
{
	pthread_mutex_lock(&q->mu);
	q->cap_ns = per_namespace > 0 ? per_namespace : 0;
	q->cap_flow = per_flow > 0 ? per_flow : 0;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

void workqueue_set_fifo(struct workqueue *q, int fifo)
{
	pthread_mutex_lock(&q->mu);
	q->fifo = fifo != 0;
	pthread_mutex_unlock(&q->mu);
}

static void free_bucket(struct workqueue *q, struct ns_bucket *b)
{
	HASH_DEL(q->buckets, b);
	token_bucket_release(&b->tb);
	free(b->ns);
	free(b);
}

void workqueue_free(struct workqueue *q)
{
	if (!q)
		return;
	free_lane(&q->ord);
	free_lane(&q->low);
	set_clear(&q->dirty);
	set_clear(&q->processing);
	active_clear(&q->active_flow);
	active_clear(&q->active_ns);
	drop_delayed(q);
	free(q->heap);
	struct failure *f, *t;
	HASH_ITER(hh, q->failures, f, t)
	{
		HASH_DEL(q->failures, f);
		free(f->key);
		free(f);
	}
	struct ns_bucket *b, *bt;
	HASH_ITER(hh, q->buckets, b, bt)
	{
		free_bucket(q, b);
	}
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

void workqueue_set_low_limit(struct workqueue *q, int max_concurrent)
{
	pthread_mutex_lock(&q->mu);
	q->low_max = max_concurrent > 0 ? max_concurrent : 0;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

static void add_after(struct workqueue *q, const char *key, const char *flow, long delay_ms, int low)
{
	if (delay_ms <= 0) {
		pthread_mutex_lock(&q->mu);
		add_locked(q, key, flow, low);
		pthread_mutex_unlock(&q->mu);
		return;
	}
	int64_t ready = ktime_mono_ms() + delay_ms;
	pthread_mutex_lock(&q->mu);
	if (q->shutting_down) {
		pthread_mutex_unlock(&q->mu);
		return;
	}
	struct delayed *d;
	HASH_FIND_STR(q->waiting, key, d);
	if (d) {
		if (ready < d->ready_ms) {
			d->ready_ms = ready;
			heap_up(q, d->pos);
		}
		d->low = d->low && low; /* an ordinary wait wins */
	} else {
		d = xcalloc(1, sizeof *d);
		d->key = xstrdup(key);
		d->flow = xstrdup(flow ? flow : known_flow(q, key));
		d->ready_ms = ready;
		d->low = low;
		if (q->nheap == q->capheap) {
			q->capheap = q->capheap ? q->capheap * 2 : 16;
			q->heap = xrealloc(q->heap, q->capheap * sizeof *q->heap);
		}
		d->pos = q->nheap;
		q->heap[q->nheap++] = d;
		HASH_ADD_KEYPTR(hh, q->waiting, d->key, strlen(d->key), d);
		heap_up(q, d->pos);
	}
	/* Waiting getters recompute how long to sleep. */
	if (q->heap[0] == d)
		pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

/* Frees the buckets that filled up again (the same as new ones), at most
 * once a second: one walk over the namespaces that retried in the last
 * BUCKET_BURST / BUCKET_QPS seconds or so. Caller holds mu. */
static void forget_full_buckets(struct workqueue *q)
{
	int64_t now = ktime_mono_ms();
	if (now - q->buckets_walked_ms < 1000)
		return;
	q->buckets_walked_ms = now;
	struct ns_bucket *b, *t;
	HASH_ITER(hh, q->buckets, b, t)
	{
		if (token_bucket_full(&b->tb))
			free_bucket(q, b);
	}
}

static long next_backoff_ms(struct workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	struct failure *f;
	HASH_FIND_STR(q->failures, key, f);
	if (!f) {
		f = xcalloc(1, sizeof *f);
		f->key = xstrdup(key);
		HASH_ADD_KEYPTR(hh, q->failures, f->key, strlen(f->key), f);
	}
	int exp = f->n++;
	const char *slash = strchr(key, '/');
	size_t nslen = slash ? (size_t)(slash - key) : 0;
	forget_full_buckets(q);
	struct ns_bucket *b;
	HASH_FIND(hh, q->buckets, key, nslen, b);
	if (!b) {
		b = xcalloc(1, sizeof *b);
		b->ns = xstrndup(key, nslen);
		token_bucket_init(&b->tb, BUCKET_QPS, BUCKET_BURST);
		HASH_ADD_KEYPTR(hh, q->buckets, b->ns, nslen, b);
	}
	/* Under mu: the next walk may free the bucket. */
	int64_t overall = token_bucket_reserve(&b->tb);
	pthread_mutex_unlock(&q->mu);
	long per = BACKOFF_MAX_MS;
	if (exp < 30) {
		int64_t d = (int64_t)BACKOFF_BASE_MS << exp;
		per = d < BACKOFF_MAX_MS ? (long)d : BACKOFF_MAX_MS;
	}
	return overall > per ? (long)overall : per;
}

/* min_ms is capped at BACKOFF_MAX_MS: the API's Retry-After can ask for a day
 * (errors.c's clamp), and one such answer, say from an admission webhook,
 * would park the key that long unless another event came. */
static void add_rate_limited(struct workqueue *q, const char *key, long min_ms)
{
	if (min_ms > BACKOFF_MAX_MS)
		min_ms = BACKOFF_MAX_MS;
	long d = next_backoff_ms(q, key);
	pthread_mutex_lock(&q->mu);
	if (q->m.retries)
		q->m.retries(q->m.ctx);
	pthread_mutex_unlock(&q->mu);
	add_after(q, key, NULL, d > min_ms ? d : min_ms, 0);
}

void workqueue_set_metrics(struct workqueue *q, const struct workqueue_metrics *m)
{
	pthread_mutex_lock(&q->mu);
	q->m = *m;
	pthread_mutex_unlock(&q->mu);
}

static void forget(struct workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	struct failure *f;
	HASH_FIND_STR(q->failures, key, f);
	if (f) {
		HASH_DEL(q->failures, f);
		free(f->key);
		free(f);
	}
	pthread_mutex_unlock(&q->mu);
}

static int num_requeues(struct workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	struct failure *f;
	HASH_FIND_STR(q->failures, key, f);
	int n = f ? f->n : 0;
	pthread_mutex_unlock(&q->mu);
	return n;
}

/* Takes the next key a getter may have (caller holds mu; NULL: none): the
 * ordinary lane first, the low lane while under its cap. *low tells which,
 * *bucket its namespace's bucket. So that a steady backlog of ordinary keys
 * (workers that always find one ready) never holds the low lane back for
 * good, it gets one key ahead of them each LOW_FLOOR_MS. */
static struct node *pop_locked(struct workqueue *q, int *low, int *bucket)
{
	int room = !q->low_max || q->low_active < q->low_max;
	int64_t now = ktime_mono_ms();
	struct node *n = NULL;
	*low = 1;
	int64_t waited = now - (q->low_served_ms > q->low.since_ms ? q->low_served_ms : q->low.since_ms);
	if (room && q->low.len && waited >= LOW_FLOOR_MS)
		n = pop_lane(q, &q->low, bucket);
	if (!n) {
		*low = 0;
		n = pop_lane(q, &q->ord, bucket);
	}
	if (!n && room) {
		*low = 1;
		n = pop_lane(q, &q->low, bucket);
	}
	if (n && *low)
		q->low_served_ms = now;
	return n;
}

/* Counts the processed key m in (d 1) or out (d -1) of its namespace's and
 * flow's active keys. */
static void count_active(struct workqueue *q, const struct member *m, int d)
{
	char ns[256], id[512];
	ns_of(m->key, ns, sizeof ns);
	flow_id(ns, m->flow, id, sizeof id);
	int64_t now = ktime_mono_ms();
	active_add(q, &q->active_ns, ns, d, now); /* before its flow: a new flow counts in it */
	active_add(q, &q->active_flow, id, d, now);
}

static char *get(struct workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	struct node *n;
	int low, bucket;
	for (;;) {
		/* Shut down: not one more key, however many are ready (see
		 * workqueue_shutdown). */
		if (q->shutting_down) {
			pthread_mutex_unlock(&q->mu);
			return NULL;
		}
		int64_t now = ktime_mono_ms();
		promote_due(q, now);
		int64_t linger_over = active_expire(q, now);
		q->pass_ms = now;
		q->gap_over = -1;
		q->sparse_ns = q->shared_gap_ms && sparse_ns_has_work(q);
		if ((n = pop_locked(q, &low, &bucket)))
			break;
		int64_t deadline = q->nheap ? q->heap[0]->ready_ms : -1;
		if (q->len && linger_over >= 0 && (deadline < 0 || linger_over < deadline))
			deadline = linger_over; /* a key held by a shared cap may go then */
		if (q->len && q->gap_over >= 0 && (deadline < 0 || q->gap_over < deadline))
			deadline = q->gap_over; /* ... or by the shared rate's gap */
		ktime_cond_wait_until(&q->cv, &q->mu, deadline);
	}
	int64_t now = mono_us();
	struct member *dm = set_find(q->dirty, n->key);
	if (dm) {
		double waited = (double)(now - dm->since_us) / 1e6;
		if (q->m.queued)
			q->m.queued(q->m.ctx, waited);
		if (q->m.ns_queued)
			q->m.ns_queued(q->m.ctx, bucket, waited);
	}
	struct member *pm = set_add(&q->processing, n->key, dm ? dm->flow : "", now);
	pm->low = low;
	count_active(q, pm, 1);
	q->low_active += low;
	set_del(&q->dirty, n->key);
	if (q->len)
		pthread_cond_signal(&q->cv); /* promote_due may have queued several */
	pthread_mutex_unlock(&q->mu);
	char *key = n->key;
	free(n);
	return key;
}

static void done(struct workqueue *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	struct member *pm = set_find(q->processing, key);
	if (q->m.worked && pm)
		q->m.worked(q->m.ctx, (double)(mono_us() - pm->since_us) / 1e6);
	if (pm && pm->low) {
		q->low_active--;
		pthread_cond_signal(&q->cv); /* a low key may go now */
	}
	if (pm) {
		count_active(q, pm, -1);
		if (q->cap_ns || q->cap_flow || q->shared_ns || q->shared_flow)
			pthread_cond_signal(&q->cv); /* its namespace may be under its cap again */
	}
	set_del(&q->processing, key);
	struct member *dm = set_find(q->dirty, key);
	if (dm && !dm->node && !q->shutting_down)
		dm->node = push_locked(q, key, dm->flow, dm->low);
	pthread_mutex_unlock(&q->mu);
}

void workqueue_shutdown(struct workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	q->shutting_down = 1;
	drop_delayed(q);
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

size_t workqueue_len(struct workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	if (!q->shutting_down)
		promote_due(q, ktime_mono_ms());
	size_t n = q->len;
	pthread_mutex_unlock(&q->mu);
	return n;
}

/* ---- items: (kind, key) ---- */

/* The queue's own key of an item: its kind as one byte (1 + kind), then the
 * key, so that items of two kinds never meet and each kind has its own
 * namespace buckets (the part before '/'). Caller frees. */
static char *item_key(int kind, const char *key)
{
	size_t n = strlen(key);
	char *k = xmalloc(n + 2);
	k[0] = (char)(1 + (kind >= 0 && kind < WORKQUEUE_KINDS ? kind : 0));
	memcpy(k + 1, key, n + 1);
	return k;
}

void workqueue_add(struct workqueue *q, int kind, const char *key)
{
	workqueue_add_flow_after(q, kind, key, NULL, 0);
}

void workqueue_add_flow(struct workqueue *q, int kind, const char *key, const char *flow)
{
	workqueue_add_flow_after(q, kind, key, flow ? flow : "", 0);
}

void workqueue_add_flow_after(struct workqueue *q, int kind, const char *key, const char *flow, long delay_ms)
{
	char *k = item_key(kind, key);
	add_after(q, k, flow, delay_ms, 0);
	free(k);
}

void workqueue_add_after(struct workqueue *q, int kind, const char *key, long delay_ms)
{
	workqueue_add_flow_after(q, kind, key, NULL, delay_ms);
}

void workqueue_add_after_low(struct workqueue *q, int kind, const char *key, long delay_ms)
{
	char *k = item_key(kind, key);
	add_after(q, k, NULL, delay_ms, 1);
	free(k);
}

void workqueue_add_rate_limited(struct workqueue *q, int kind, const char *key)
{
	workqueue_add_rate_limited_min(q, kind, key, 0);
}

void workqueue_add_rate_limited_min(struct workqueue *q, int kind, const char *key, long min_delay_ms)
{
	char *k = item_key(kind, key);
	add_rate_limited(q, k, min_delay_ms);
	free(k);
}

long workqueue_next_backoff_ms(struct workqueue *q, int kind, const char *key)
{
	char *k = item_key(kind, key);
	long d = next_backoff_ms(q, k);
	free(k);
	return d;
}

size_t workqueue_buckets(struct workqueue *q)
{
	pthread_mutex_lock(&q->mu);
	size_t n = HASH_COUNT(q->buckets);
	pthread_mutex_unlock(&q->mu);
	return n;
}

void workqueue_forget(struct workqueue *q, int kind, const char *key)
{
	char *k = item_key(kind, key);
	forget(q, k);
	free(k);
}

int workqueue_num_requeues(struct workqueue *q, int kind, const char *key)
{
	char *k = item_key(kind, key);
	int n = num_requeues(q, k);
	free(k);
	return n;
}

long workqueue_wait_ms(struct workqueue *q, int kind, const char *key)
{
	char *k = item_key(kind, key);
	pthread_mutex_lock(&q->mu);
	struct delayed *d;
	HASH_FIND_STR(q->waiting, k, d);
	long ms = -1;
	if (d) {
		int64_t left = d->ready_ms - ktime_mono_ms();
		ms = left > 0 ? (long)left : 0;
	}
	pthread_mutex_unlock(&q->mu);
	free(k);
	return ms;
}

char *workqueue_get(struct workqueue *q, int *kind)
{
	char *k = get(q);
	if (!k)
		return NULL;
	if (kind)
		*kind = (unsigned char)k[0] - 1;
	memmove(k, k + 1, strlen(k)); /* the key and its NUL */
	return k;
}

void workqueue_done(struct workqueue *q, int kind, const char *key)
{
	char *k = item_key(kind, key);
	done(q, k);
	free(k);
}

void workqueue_set_shared_rate(struct workqueue *q, double per_second)
{
	pthread_mutex_lock(&q->mu);
	q->shared_gap_ms = per_second > 0 ? (long)(1000.0 / per_second + 0.5) : 0;
	if (per_second > 0 && q->shared_gap_ms < 1)
		q->shared_gap_ms = 1;
	pthread_mutex_unlock(&q->mu);
}
