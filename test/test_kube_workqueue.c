/* Unit tests for the work queue: dedup, one worker per key, backoff, delayed
 * adds, shutdown. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include <CUnit/CUnit.h>

#include "base/ktime.h"
#include "kube/ratelimit.h"
#include "kube/workqueue.h"
#include "test_suites.h"

void register_kube_workqueue_tests(void);

/* Gets a key and compares it; frees it and marks it done. */
static void expect_get(struct workqueue *q, const char *want)
{
	char *k = workqueue_get(q, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(k);
	CU_ASSERT_STRING_EQUAL(k, want);
	workqueue_done(q, 0, k);
	free(k);
}

/* Items are typed: one key of two kinds is two items, each handed out
 * with its kind, processed, backed off and forgotten apart. */
static void test_kinds(void)
{
	struct workqueue *q = workqueue_new();
	workqueue_add(q, 0, "ns/a");
	workqueue_add(q, 2, "ns/a");
	workqueue_add(q, 2, "ns/a");
	CU_ASSERT_EQUAL(workqueue_len(q), 2);
	int k1 = -1, k2 = -1;
	char *a = workqueue_get(q, &k1), *b = workqueue_get(q, &k2);
	CU_ASSERT_STRING_EQUAL(a, "ns/a");
	CU_ASSERT_STRING_EQUAL(b, "ns/a");
	CU_ASSERT_EQUAL(k1, 0);
	CU_ASSERT_EQUAL(k2, 2);
	workqueue_add(q, 2, "ns/a"); /* kind 2 is being processed: held back */
	CU_ASSERT_EQUAL(workqueue_len(q), 0);
	workqueue_done(q, 0, a);
	CU_ASSERT_EQUAL(workqueue_len(q), 0);
	workqueue_done(q, 2, b);
	CU_ASSERT_EQUAL(workqueue_len(q), 1);
	free(a);
	free(b);
	CU_ASSERT_EQUAL(workqueue_next_backoff_ms(q, 1, "ns/x"), 5);
	CU_ASSERT_EQUAL(workqueue_next_backoff_ms(q, 1, "ns/x"), 10);
	CU_ASSERT_EQUAL(workqueue_next_backoff_ms(q, 0, "ns/x"), 5);
	CU_ASSERT_EQUAL(workqueue_num_requeues(q, 1, "ns/x"), 2);
	workqueue_forget(q, 1, "ns/x");
	CU_ASSERT_EQUAL(workqueue_num_requeues(q, 1, "ns/x"), 0);
	CU_ASSERT_EQUAL(workqueue_num_requeues(q, 0, "ns/x"), 1);
	workqueue_free(q);
}

static void test_dedup(void)
{
	struct workqueue *q = workqueue_new();
	workqueue_add(q, 0, "ns/a");
	workqueue_add(q, 0, "ns/a");
	workqueue_add(q, 0, "ns/b");
	workqueue_add(q, 0, "ns/a");
	CU_ASSERT_EQUAL(workqueue_len(q), 2);
	char *a = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(a, "ns/a");
	/* Added while processing: not handed out until done. */
	workqueue_add(q, 0, "ns/a");
	workqueue_add(q, 0, "ns/a");
	CU_ASSERT_EQUAL(workqueue_len(q), 1);
	expect_get(q, "ns/b");
	CU_ASSERT_EQUAL(workqueue_len(q), 0);
	workqueue_done(q, 0, a);
	free(a);
	CU_ASSERT_EQUAL(workqueue_len(q), 1);
	expect_get(q, "ns/a");
	CU_ASSERT_EQUAL(workqueue_len(q), 0);
	workqueue_free(q);
}

#define NKEYS 16
#define NWORKERS 4
#define NADDS 4000

struct conc {
	struct workqueue *q;
	atomic_int in_flight[NKEYS];
	atomic_int processed[NKEYS];
	atomic_int violations;
	atomic_int pending_adds;
};

static int key_index(const char *k)
{
	return atoi(k + 4);
}

static void *worker(void *u)
{
	struct conc *c = u;
	char *k;
	unsigned seed = (unsigned)(uintptr_t)&k;
	while ((k = workqueue_get(c->q, NULL))) {
		int i = key_index(k);
		if (atomic_fetch_add(&c->in_flight[i], 1) != 0)
			atomic_fetch_add(&c->violations, 1);
		struct timespec ts = { 0, (long)(rand_r(&seed) % 200) * 1000 };
		nanosleep(&ts, NULL);
		atomic_fetch_add(&c->processed[i], 1);
		atomic_fetch_sub(&c->in_flight[i], 1);
		workqueue_done(c->q, 0, k);
		free(k);
	}
	return NULL;
}

static void *producer(void *u)
{
	struct conc *c = u;
	unsigned seed = 7;
	char key[32];
	for (int i = 0; i < NADDS; i++) {
		snprintf(key, sizeof key, "key-%d", rand_r(&seed) % NKEYS);
		workqueue_add(c->q, 0, key);
		if (i % 64 == 0) {
			struct timespec ts = { 0, 100000 };
			nanosleep(&ts, NULL);
		}
	}
	atomic_store(&c->pending_adds, 0);
	return NULL;
}

static void test_one_worker_per_key(void)
{
	static struct conc c;
	memset(&c, 0, sizeof c);
	c.q = workqueue_new();
	atomic_store(&c.pending_adds, 1);
	pthread_t w[NWORKERS], p1, p2;
	for (int i = 0; i < NWORKERS; i++)
		pthread_create(&w[i], NULL, worker, &c);
	pthread_create(&p1, NULL, producer, &c);
	pthread_create(&p2, NULL, producer, &c);
	pthread_join(p1, NULL);
	pthread_join(p2, NULL);
	/* Let the workers drain what is queued, then shut down. */
	int64_t deadline = ktime_mono_ms() + 10000;
	while (workqueue_len(c.q) > 0 && ktime_mono_ms() < deadline)
		ktime_sleep_ms(5);
	workqueue_shutdown(c.q);
	for (int i = 0; i < NWORKERS; i++)
		pthread_join(w[i], NULL);
	CU_ASSERT_EQUAL(atomic_load(&c.violations), 0);
	int total = 0;
	for (int i = 0; i < NKEYS; i++) {
		CU_ASSERT(atomic_load(&c.processed[i]) >= 1);
		total += atomic_load(&c.processed[i]);
	}
	/* Dedup collapses most of the 8000 adds. */
	CU_ASSERT(total < 2 * NADDS);
	workqueue_free(c.q);
}

static void test_backoff(void)
{
	struct workqueue *q = workqueue_new();
	long want[] = { 5, 10, 20, 40, 80, 160 };
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		CU_ASSERT_EQUAL(workqueue_next_backoff_ms(q, 0, "a"), want[i]);
	CU_ASSERT_EQUAL(workqueue_num_requeues(q, 0, "a"), 6);
	CU_ASSERT_EQUAL(workqueue_next_backoff_ms(q, 0, "b"), 5); /* per key */
	workqueue_forget(q, 0, "a");
	CU_ASSERT_EQUAL(workqueue_num_requeues(q, 0, "a"), 0);
	CU_ASSERT_EQUAL(workqueue_next_backoff_ms(q, 0, "a"), 5);
	CU_ASSERT_EQUAL(workqueue_next_backoff_ms(q, 0, "a"), 10);
	workqueue_free(q);

	/* The cap: 5 ms * 2^n stops at 1000 s. */
	q = workqueue_new();
	long last = 0;
	for (int i = 0; i < 40; i++)
		last = workqueue_next_backoff_ms(q, 0, "c");
	CU_ASSERT_EQUAL(last, 1000L * 1000);
	workqueue_free(q);

	/* The overall bucket: 100 at once pass, then 10 per second. */
	q = workqueue_new();
	char key[16];
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof key, "k%d", i);
		CU_ASSERT_EQUAL(workqueue_next_backoff_ms(q, 0, key), 5);
	}
	long d1 = workqueue_next_backoff_ms(q, 0, "x1");
	long d2 = workqueue_next_backoff_ms(q, 0, "x2");
	CU_ASSERT(d1 > 0 && d1 <= 100);
	CU_ASSERT(d2 - d1 >= 80 && d2 - d1 <= 100);
	workqueue_free(q);
}

static void test_rate_limited_delivery(void)
{
	struct workqueue *q = workqueue_new();
	for (int i = 0; i < 4; i++)
		(void)workqueue_next_backoff_ms(q, 0, "k"); /* next is 80 ms */
	int64_t t0 = ktime_mono_ms();
	workqueue_add_rate_limited(q, 0, "k");
	CU_ASSERT_EQUAL(workqueue_len(q), 0);
	expect_get(q, "k");
	int64_t took = ktime_mono_ms() - t0;
	CU_ASSERT(took >= 78 && took < 1000);
	CU_ASSERT_EQUAL(workqueue_num_requeues(q, 0, "k"), 5);
	workqueue_free(q);
}

static void test_add_after_order(void)
{
	struct workqueue *q = workqueue_new();
	int64_t t0 = ktime_mono_ms();
	workqueue_add_after(q, 0, "c", 150);
	workqueue_add_after(q, 0, "a", 50);
	workqueue_add_after(q, 0, "b", 100);
	workqueue_add_after(q, 0, "b", 400); /* later: the earlier time is kept */
	workqueue_add_after(q, 0, "d", 10000);
	workqueue_add_after(q, 0, "d", 200); /* earlier: moved up */
	workqueue_add(q, 0, "now");
	expect_get(q, "now");
	expect_get(q, "a");
	CU_ASSERT(ktime_mono_ms() - t0 >= 49);
	expect_get(q, "b");
	CU_ASSERT(ktime_mono_ms() - t0 >= 99);
	expect_get(q, "c");
	CU_ASSERT(ktime_mono_ms() - t0 >= 149);
	expect_get(q, "d");
	int64_t took = ktime_mono_ms() - t0;
	CU_ASSERT(took >= 199 && took < 2000);
	/* A delayed key that is already queued is handed out once. */
	workqueue_add(q, 0, "e");
	workqueue_add_after(q, 0, "e", 20);
	ktime_sleep_ms(40);
	CU_ASSERT_EQUAL(workqueue_len(q), 1);
	expect_get(q, "e");
	CU_ASSERT_EQUAL(workqueue_len(q), 0);
	workqueue_free(q);
}

struct getter {
	struct workqueue *q;
	atomic_int returned_null;
};

static void *blocked_getter(void *u)
{
	struct getter *g = u;
	char *k = workqueue_get(g->q, NULL);
	if (!k)
		atomic_fetch_add(&g->returned_null, 1);
	free(k);
	return NULL;
}

/* Starts one blocked_getter on q with g (reset), its thread returned. */
static pthread_t start_getter(struct getter *g, struct workqueue *q)
{
	g->q = q;
	atomic_store(&g->returned_null, 0);
	pthread_t t;
	pthread_create(&t, NULL, blocked_getter, g);
	return t;
}

/* SIGTERM with a deep backlog: once shut down the queue hands out no more
 * keys, so the workers stop after the keys they hold rather than after
 * reconciling the whole backlog (each reconcile makes API calls: 2,000
 * queued Sandboxes took the controller past its 10 s to stop). The keys
 * left are derived state: the next leader's informers list them again. */
static void test_shutdown_backlog(void)
{
	struct workqueue *q = workqueue_new();
	char key[64];
	for (int i = 0; i < 10000; i++) {
		snprintf(key, sizeof key, "%s/s-%d", i % 4 ? "noisy" : "victim", i);
		workqueue_add(q, 0, key);
	}
	char *held = workqueue_get(q, NULL); /* a worker's key in flight */
	CU_ASSERT_PTR_NOT_NULL_FATAL(held);
	workqueue_add(q, 0, held); /* changed while being processed */
	workqueue_shutdown(q);
	char *k = workqueue_get(q, NULL);
	CU_ASSERT_PTR_NULL(k); /* not one more key of the backlog */
	free(k);
	workqueue_done(q, 0, held); /* the worker finishes: nothing is queued again */
	free(held);
	k = workqueue_get(q, NULL);
	CU_ASSERT_PTR_NULL(k);
	free(k);
	workqueue_free(q);
}

static void test_shutdown(void)
{
	struct workqueue *q = workqueue_new();
	workqueue_add(q, 0, "a");
	workqueue_add(q, 0, "b");
	workqueue_add_after(q, 0, "later", 30);
	char *a = workqueue_get(q, NULL);
	workqueue_add(q, 0, "a"); /* dirty while processing */
	workqueue_shutdown(q);
	workqueue_add(q, 0, "ignored");
	CU_ASSERT_PTR_NULL(workqueue_get(q, NULL)); /* "b" is not handed out */
	/* Not queued again, though it was added while being processed. */
	workqueue_done(q, 0, a);
	free(a);
	ktime_sleep_ms(50);
	CU_ASSERT_PTR_NULL(workqueue_get(q, NULL)); /* "later" was dropped */
	workqueue_free(q);

	/* Getters blocked on an empty queue are woken. */
	static struct getter g;
	g.q = workqueue_new();
	atomic_store(&g.returned_null, 0);
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, blocked_getter, &g);
	ktime_sleep_ms(50);
	CU_ASSERT_EQUAL(atomic_load(&g.returned_null), 0);
	workqueue_shutdown(g.q);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	CU_ASSERT_EQUAL(atomic_load(&g.returned_null), 3);
	workqueue_free(g.q);
}

static void test_delayed_wakes_blocked_getter(void)
{
	/* A getter already asleep on an empty queue wakes for a delayed add. */
	struct workqueue *q = workqueue_new();
	static struct getter g;
	pthread_t t = start_getter(&g, q);
	ktime_sleep_ms(20);
	workqueue_add_after(q, 0, "x", 30);
	int64_t t0 = ktime_mono_ms();
	pthread_join(t, NULL);
	CU_ASSERT(ktime_mono_ms() - t0 < 1000);
	CU_ASSERT_EQUAL(atomic_load(&g.returned_null), 0);
	workqueue_free(q);
}
/* The overall bucket is per namespace (the part of the key before '/'): many
 * failing Sandboxes in one namespace do not delay another namespace's retries. */
static void test_bucket_per_namespace(void)
{
	struct workqueue *q = workqueue_new();
	char key[32];
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof key, "noisy/s%d", i);
		(void)workqueue_next_backoff_ms(q, 0, key);
	}
	snprintf(key, sizeof key, "noisy/s%d", 301);
	CU_ASSERT(workqueue_next_backoff_ms(q, 0, key) > 1000); /* that namespace waits */
	CU_ASSERT_EQUAL(workqueue_next_backoff_ms(q, 0, "quiet/s1"), 5);
	workqueue_free(q);
}

/* A namespace's overall bucket that filled up again is the same as a new
 * one: it is forgotten, so a controller serving short-lived namespaces (one
 * per agent session) does not keep one for each it ever retried in. One
 * that is still drawn down is kept, with its debt. */
static void test_buckets_forgotten_when_full(void)
{
	struct workqueue *q = workqueue_new();
	char key[32];
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof key, "short-%d/s", i);
		(void)workqueue_next_backoff_ms(q, 0, key); /* one token: full again in 100 ms */
	}
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof key, "noisy/s%d", i);
		(void)workqueue_next_backoff_ms(q, 0, key); /* owes 200 tokens: 30 s to fill */
	}
	CU_ASSERT_EQUAL(workqueue_buckets(q), 1001);
	usleep(1200 * 1000);
	CU_ASSERT_EQUAL(workqueue_next_backoff_ms(q, 0, "quiet/s1"), 5);
	CU_ASSERT_EQUAL(workqueue_buckets(q), 2);			 /* noisy (still owing) and quiet */
	CU_ASSERT(workqueue_next_backoff_ms(q, 0, "noisy/s301") > 1000); /* noisy still waits */
	workqueue_free(q);
}

/* The API's Retry-After is a floor under the backoff, and still counts. */
static void test_rate_limited_min(void)
{
	struct workqueue *q = workqueue_new();
	int64_t t0 = ktime_mono_ms();
	workqueue_add_rate_limited_min(q, 0, "ns/k", 300);
	CU_ASSERT_EQUAL(workqueue_len(q), 0);
	expect_get(q, "ns/k");
	int64_t took = ktime_mono_ms() - t0;
	CU_ASSERT(took >= 295 && took < 2000);
	CU_ASSERT_EQUAL(workqueue_num_requeues(q, 0, "ns/k"), 1);
	workqueue_free(q);
}

/* A Retry-After beyond the backoff's cap (1000 s), such as a day from an
 * admission webhook's retryAfterSeconds, waits no longer than that cap: one
 * answer does not park a key for a day. A shorter one is still a floor. */
static void test_retry_after_capped(void)
{
	struct workqueue *q = workqueue_new();
	CU_ASSERT_EQUAL(workqueue_wait_ms(q, 0, "ns/k"), -1);
	workqueue_add_rate_limited_min(q, 0, "ns/k", 86400L * 1000);
	long w = workqueue_wait_ms(q, 0, "ns/k");
	CU_ASSERT(w > 1000L * 1000 - 5000 && w <= 1000L * 1000);
	CU_ASSERT_EQUAL(workqueue_wait_ms(q, 1, "ns/k"), -1); /* another kind's item */
	workqueue_add_rate_limited_min(q, 0, "ns/short", 300);
	w = workqueue_wait_ms(q, 0, "ns/short");
	CU_ASSERT(w > 200 && w <= 300);
	expect_get(q, "ns/short");
	CU_ASSERT_EQUAL(workqueue_wait_ms(q, 0, "ns/short"), -1);
	workqueue_free(q);
}

struct wq_counts {
	size_t depth;
	int adds, retries, queued, worked;
};

static void c_depth(void *ctx, size_t d)
{
	((struct wq_counts *)ctx)->depth = d;
}
static void c_adds(void *ctx)
{
	((struct wq_counts *)ctx)->adds++;
}
static void c_retries(void *ctx)
{
	((struct wq_counts *)ctx)->retries++;
}
static void c_queued(void *ctx, double s)
{
	((struct wq_counts *)ctx)->queued += s >= 0;
}
static void c_worked(void *ctx, double s)
{
	((struct wq_counts *)ctx)->worked += s >= 0;
}

/* A server's Retry-After outlasts the short first backoff (5 ms): the key
 * comes back no earlier than it asked; the metrics callbacks see it all. */
static void test_retry_after_min(void)
{
	struct workqueue *q = workqueue_new();
	struct wq_counts n = { 0 };
	struct workqueue_metrics m = { .ctx = &n, .depth = c_depth, .adds = c_adds, .retries = c_retries, .queued = c_queued, .worked = c_worked };
	workqueue_set_metrics(q, &m);
	workqueue_add(q, 0, "ns/a");
	CU_ASSERT_EQUAL(n.depth, 1);
	char *k = workqueue_get(q, NULL);
	CU_ASSERT_EQUAL(n.depth, 0);
	int64_t t0 = ktime_mono_ms();
	workqueue_add_rate_limited_min(q, 0, k, 300);
	workqueue_done(q, 0, k);
	free(k);
	CU_ASSERT_EQUAL(workqueue_len(q), 0);
	expect_get(q, "ns/a");
	CU_ASSERT(ktime_mono_ms() - t0 >= 300);
	CU_ASSERT_EQUAL(workqueue_num_requeues(q, 0, "ns/a"), 1);
	CU_ASSERT_EQUAL(n.adds, 2);
	CU_ASSERT_EQUAL(n.retries, 1);
	CU_ASSERT_EQUAL(n.queued, 2);
	CU_ASSERT_EQUAL(n.worked, 2);
	workqueue_free(q);
}

/* Gets a key, marks it done and returns its character at offset at ('\0'
 * past its end). */
static char next_char(struct workqueue *q, size_t at)
{
	char *k = workqueue_get(q, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(k);
	char c = strlen(k) > at ? k[at] : '\0';
	workqueue_done(q, 0, k);
	free(k);
	return c;
}

/* Gets a key, marks it done and returns its namespace's first letter. */
static char next_ns(struct workqueue *q)
{
	return next_char(q, 0);
}

/* Fair across namespaces: another namespace's first key is served next,
 * however deep one namespace's backlog; then the two take turns. */
static void test_fair_namespaces(void)
{
	struct workqueue *q = workqueue_new();
	char key[32];
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof key, "noisy/s%d", i);
		workqueue_add(q, 0, key);
	}
	CU_ASSERT_EQUAL(next_ns(q), 'n'); /* the backlog is being worked */
	workqueue_add(q, 0, "victim/a");
	workqueue_add(q, 0, "victim/b");
	workqueue_add(q, 0, "victim/c");
	CU_ASSERT_EQUAL(next_ns(q), 'v');
	CU_ASSERT_EQUAL(next_ns(q), 'n');
	CU_ASSERT_EQUAL(next_ns(q), 'v');
	CU_ASSERT_EQUAL(next_ns(q), 'n');
	CU_ASSERT_EQUAL(next_ns(q), 'v');
	for (int i = 0; i < 997; i++)
		CU_ASSERT_EQUAL(next_ns(q), 'n');
	CU_ASSERT_EQUAL(workqueue_len(q), 0);
	/* A key of any kind belongs to its namespace's turn (a pool of the
	 * victim namespace is not behind noisy Sandboxes either). */
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof key, "noisy/s%d", i);
		workqueue_add(q, 0, key);
	}
	CU_ASSERT_EQUAL(next_ns(q), 'n');
	workqueue_add(q, 2, "victim/pool");
	int kind = -1;
	char *k = workqueue_get(q, &kind);
	CU_ASSERT_STRING_EQUAL(k, "victim/pool");
	CU_ASSERT_EQUAL(kind, 2);
	workqueue_done(q, 2, k);
	free(k);
	/* Namespaces that arrive together are served in their order, once
	 * each, then in turn. */
	workqueue_add(q, 0, "a/1");
	workqueue_add(q, 0, "a/2");
	workqueue_add(q, 0, "b/1");
	workqueue_add(q, 0, "c/1");
	CU_ASSERT_EQUAL(next_ns(q), 'a');
	CU_ASSERT_EQUAL(next_ns(q), 'b');
	CU_ASSERT_EQUAL(next_ns(q), 'c');
	CU_ASSERT_EQUAL(next_ns(q), 'n');
	CU_ASSERT_EQUAL(next_ns(q), 'a');
	CU_ASSERT_EQUAL(next_ns(q), 'n');
	workqueue_free(q);
}

/* Within a namespace, its owners (flows) take turns the same way; a worker's
 * re-add keeps the key's flow. */
static void test_fair_owners(void)
{
	struct workqueue *q = workqueue_new();
	char key[32];
	for (int i = 0; i < 50; i++) {
		snprintf(key, sizeof key, "team/n%d", i);
		workqueue_add_flow(q, 0, key, "noisy");
	}
	expect_get(q, "team/n0");
	workqueue_add_flow(q, 0, "team/v1", "victim");
	workqueue_add_flow(q, 0, "team/v2", "victim");
	char *k = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(k, "team/v1");
	/* re-queued by its worker: still the victim's; due after the three gets
	 * below (1 ms was not, now and then, under ASan on a busy host) */
	workqueue_add_after(q, 0, k, 300);
	workqueue_done(q, 0, k);
	free(k);
	expect_get(q, "team/n1");
	expect_get(q, "team/v2");
	expect_get(q, "team/n2");
	usleep(350 * 1000);
	expect_get(q, "team/v1"); /* its flow had left: served next again */
	expect_get(q, "team/n3");
	workqueue_free(q);
}

/* With caps, a namespace (and a flow of it) has at most that many keys out
 * at once: the rest wait, and other namespaces' keys pass them. */
static void test_fair_caps(void)
{
	struct workqueue *q = workqueue_new();
	workqueue_set_caps(q, 2, 1);
	workqueue_add_flow(q, 0, "a/x1", "x");
	workqueue_add_flow(q, 0, "a/x2", "x");
	workqueue_add_flow(q, 0, "a/y1", "y");
	workqueue_add_flow(q, 0, "a/z1", "z");
	workqueue_add_flow(q, 0, "b/1", "");
	char *k1 = workqueue_get(q, NULL), *k2 = workqueue_get(q, NULL), *k3 = workqueue_get(q, NULL);
	/* a's first key, b's, then a's next owner: x2 waits for x1 (owner
	 * cap), and a's third owner for one of a's two (namespace cap) */
	CU_ASSERT_STRING_EQUAL(k1, "a/x1");
	CU_ASSERT_STRING_EQUAL(k2, "b/1");
	CU_ASSERT_STRING_EQUAL(k3, "a/y1");
	CU_ASSERT_EQUAL(workqueue_len(q), 2);
	workqueue_add(q, 0, "c/1");
	char *k4 = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(k4, "c/1");
	workqueue_done(q, 0, k1); /* x1 done: a has room, x too */
	char *k5 = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(k5, "a/z1");
	workqueue_done(q, 0, k3);
	char *k6 = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(k6, "a/x2");
	char *all[] = { k1, k2, k3, k4, k5, k6 };
	for (size_t i = 0; i < 6; i++) {
		if (i != 0 && i != 2)
			workqueue_done(q, 0, all[i]);
		free(all[i]);
	}
	CU_ASSERT_EQUAL(workqueue_len(q), 0);
	/* A getter blocked by the caps wakes when a key is done. */
	workqueue_add_flow(q, 0, "a/x3", "x");
	workqueue_add_flow(q, 0, "a/x4", "x");
	char *x3 = workqueue_get(q, NULL);
	static struct getter g;
	pthread_t t = start_getter(&g, q);
	ktime_sleep_ms(30);
	CU_ASSERT_EQUAL(workqueue_len(q), 1); /* still waiting */
	workqueue_done(q, 0, x3);
	free(x3);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(atomic_load(&g.returned_null), 0);
	workqueue_free(q);
}

/* Shared caps: a namespace alone in the queue has its full caps; while
 * another namespace has keys (ready, being processed, or done within the
 * linger), it has the shared ones, and the same for a flow among its
 * namespace's flows. A lone tenant keeps its throughput, and a victim's calls
 * meet fewer of a busy tenant's at the API server. */
static void test_shared_caps(void)
{
	struct workqueue *q = workqueue_new();
	workqueue_set_caps(q, 4, 4);
	workqueue_set_shared_caps(q, 2, 1, 100);
	char key[32], *k[4];
	for (int i = 1; i <= 10; i++) {
		snprintf(key, sizeof key, "a/%d", i);
		workqueue_add_flow(q, 0, key, "x");
	}
	for (int i = 0; i < 4; i++) /* alone: its full caps, 4 at once */
		k[i] = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(k[3], "a/4");
	workqueue_add(q, 0, "b/1");
	workqueue_add(q, 0, "b/2");
	char *b1 = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(b1, "b/1");
	/* a has 3 at once after this, over the shared cap of 2: b goes */
	workqueue_done(q, 0, k[0]);
	char *b2 = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(b2, "b/2");
	workqueue_done(q, 0, k[1]);
	workqueue_done(q, 0, k[2]);
	char *a5 = workqueue_get(q, NULL); /* a at 1: under the shared cap */
	CU_ASSERT_STRING_EQUAL(a5, "a/5");
	char *all[] = { k[0], k[1], k[2], k[3], b1, b2, a5 };
	for (size_t i = 0; i < 7; i++)
		free(all[i]);
	workqueue_free(q);
	/* Flows of one namespace: x shares with y while y has a key, and for
	 * the linger after its last one is done. */
	q = workqueue_new();
	workqueue_set_caps(q, 4, 4);
	workqueue_set_shared_caps(q, 2, 1, 100);
	for (int i = 1; i <= 7; i++) {
		snprintf(key, sizeof key, "n/x%d", i);
		workqueue_add_flow(q, 0, key, "x");
	}
	char *x1 = workqueue_get(q, NULL), *x2 = workqueue_get(q, NULL);
	workqueue_add_flow(q, 0, "n/y1", "y");
	char *y1 = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(y1, "n/y1");
	static struct getter g;
	pthread_t t = start_getter(&g, q);
	ktime_sleep_ms(30);
	CU_ASSERT_EQUAL(workqueue_len(q), 5); /* x3 waits: x has 2, shared cap 1 */
	workqueue_done(q, 0, y1);
	ktime_sleep_ms(30);
	CU_ASSERT_EQUAL(workqueue_len(q), 5); /* y lingers */
	ktime_sleep_ms(150);
	CU_ASSERT_EQUAL(workqueue_len(q), 4); /* y's linger is over: x3 went */
	workqueue_done(q, 0, x1);
	workqueue_done(q, 0, x2);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(atomic_load(&g.returned_null), 0);
	free(x1);
	free(x2);
	free(y1);
	workqueue_free(q);
}

/* Shared caps hold back a backlogged tenant only: one whose ready keys fit
 * in its full cap (a victim's handful) keeps that cap while it shares, so
 * its keys do not queue behind the shared cap either. */
static void test_shared_caps_backlogged_only(void)
{
	struct workqueue *q = workqueue_new();
	workqueue_set_caps(q, 4, 4);
	workqueue_set_shared_caps(q, 2, 1, 100);
	char key[32];
	for (int i = 1; i <= 10; i++) {
		snprintf(key, sizeof key, "a/%d", i);
		workqueue_add(q, 0, key);
	}
	for (int i = 1; i <= 3; i++) {
		snprintf(key, sizeof key, "b/%d", i);
		workqueue_add(q, 0, key);
	}
	char *k[4];
	for (int i = 0; i < 4; i++)
		k[i] = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(k[0], "a/1");
	CU_ASSERT_STRING_EQUAL(k[1], "b/1");
	CU_ASSERT_STRING_EQUAL(k[2], "a/2");
	CU_ASSERT_STRING_EQUAL(k[3], "b/2");
	/* a (8 ready) is at its shared cap; b's third key goes all the same */
	static struct getter g;
	pthread_t t = start_getter(&g, q);
	ktime_sleep_ms(50);
	CU_ASSERT_EQUAL(workqueue_len(q), 8);
	workqueue_done(q, 0, k[0]); /* lets a blocked getter go, whatever it is */
	pthread_join(t, NULL);
	for (int i = 0; i < 4; i++)
		free(k[i]);
	workqueue_free(q);
}

/* A queue with caps 4 / 4, shared caps 2 / 1 (linger 100 ms) and a shared
 * rate of 10 a second: one start per 100 ms while shared. */
static struct workqueue *rated_queue(void)
{
	struct workqueue *q = workqueue_new();
	workqueue_set_caps(q, 4, 4);
	workqueue_set_shared_caps(q, 2, 1, 100);
	workqueue_set_shared_rate(q, 10);
	return q;
}

/* Takes n keys one after the other, each done at once; each must have
 * want at offset at (0: any). Returns the least time between two starts in
 * ms, and the whole time in *took. */
static int64_t take_spaced(struct workqueue *q, int n, size_t at, char want, int64_t *took)
{
	int64_t t0 = ktime_mono_ms(), prev = -1, least = -1;
	for (int i = 0; i < n; i++) {
		char c = next_char(q, at);
		int64_t now = ktime_mono_ms();
		if (want)
			CU_ASSERT_EQUAL(c, want);
		if (prev >= 0 && (least < 0 || now - prev < least))
			least = now - prev;
		prev = now;
	}
	*took = ktime_mono_ms() - t0;
	return least;
}

/* A shared rate: while a tenant without a backlog has work, a backlogged
 * namespace starts at most one key per 1/rate seconds (its calls per second
 * are what load the API server a victim shares, not how many it has at
 * once); alone, or beside another backlog, it starts them back to back. */
static void test_shared_rate(void)
{
	struct workqueue *q = rated_queue();
	char key[32];
	int64_t took;
	for (int i = 1; i <= 12; i++) {
		snprintf(key, sizeof key, "a/%d", i);
		workqueue_add(q, 0, key);
	}
	take_spaced(q, 3, 0, 0, &took); /* alone: no spacing */
	CU_ASSERT(took < 150);		/* spaced, 3 would take 200 ms */
	workqueue_add(q, 0, "b/1");
	char *b1 = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(b1, "b/1");
	CU_ASSERT(take_spaced(q, 3, 0, 'a', &took) >= 90); /* b has work */
	workqueue_done(q, 0, b1);
	free(b1);
	ktime_sleep_ms(160); /* b's linger is over: a is alone again */
	take_spaced(q, 3, 0, 0, &took);
	CU_ASSERT(took < 150);
	CU_ASSERT_EQUAL(workqueue_len(q), 3);
	workqueue_free(q);
	/* Another backlog is no reason to space: two bursts share by the caps. */
	q = rated_queue();
	for (int i = 1; i <= 12; i++) {
		snprintf(key, sizeof key, "a/%d", i);
		workqueue_add(q, 0, key);
		snprintf(key, sizeof key, "c/%d", i);
		workqueue_add(q, 0, key);
	}
	take_spaced(q, 6, 0, 0, &took); /* 3 each: spaced, 200 ms */
	CU_ASSERT(took < 150);
	workqueue_free(q);
	/* Owners of one namespace: x's backlog is spaced while y has work. */
	q = rated_queue();
	for (int i = 1; i <= 12; i++) {
		snprintf(key, sizeof key, "n/x%d", i);
		workqueue_add_flow(q, 0, key, "x");
	}
	workqueue_add_flow(q, 0, "n/y1", "y");
	char *x1 = workqueue_get(q, NULL), *y1 = workqueue_get(q, NULL); /* y goes next, new */
	CU_ASSERT_STRING_EQUAL(y1, "n/y1");
	workqueue_done(q, 0, x1);
	free(x1);
	CU_ASSERT(take_spaced(q, 3, 2, 'x', &took) >= 90);
	workqueue_done(q, 0, y1);
	free(y1);
	workqueue_free(q);
}

/* FIFO order, the baseline: the victim waits behind the whole backlog. */
static void test_fifo(void)
{
	struct workqueue *q = workqueue_new();
	workqueue_set_fifo(q, 1);
	char key[32];
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof key, "noisy/s%d", i);
		workqueue_add_flow(q, 0, key, "a");
	}
	workqueue_add_flow(q, 0, "victim/a", "b");
	for (int i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(next_ns(q), 'n');
	CU_ASSERT_EQUAL(next_ns(q), 'v');
	workqueue_free(q);
}

struct ns_counts {
	size_t depth[WORKQUEUE_NS_BUCKETS];
	int queued[WORKQUEUE_NS_BUCKETS];
	size_t namespaces, flows;
};

static void c_ns_depth(void *ctx, int b, size_t d)
{
	((struct ns_counts *)ctx)->depth[b] = d;
}
static void c_ns_queued(void *ctx, int b, double s)
{
	((struct ns_counts *)ctx)->queued[b] += s >= 0;
}
static void c_tenants(void *ctx, size_t namespaces, size_t flows)
{
	((struct ns_counts *)ctx)->namespaces = namespaces;
	((struct ns_counts *)ctx)->flows = flows;
}

/* Depth and wait per namespace bucket, and the namespaces and flows ready. */
static void test_ns_metrics(void)
{
	CU_ASSERT_EQUAL(workqueue_ns_bucket(""), (int)(2166136261u % WORKQUEUE_NS_BUCKETS));
	int ba = workqueue_ns_bucket("team-a"), bb = workqueue_ns_bucket("team-b");
	CU_ASSERT(ba >= 0 && ba < WORKQUEUE_NS_BUCKETS && bb >= 0 && bb < WORKQUEUE_NS_BUCKETS);
	CU_ASSERT_EQUAL_FATAL(ba == bb, 0); /* the test needs two buckets */
	struct workqueue *q = workqueue_new();
	static struct ns_counts n;
	memset(&n, 0, sizeof n);
	struct workqueue_metrics m = { .ctx = &n, .ns_depth = c_ns_depth, .ns_queued = c_ns_queued, .tenants = c_tenants };
	workqueue_set_metrics(q, &m);
	workqueue_add_flow(q, 0, "team-a/1", "alice");
	workqueue_add_flow(q, 0, "team-a/2", "bob");
	workqueue_add_flow(q, 0, "team-a/3", "bob");
	workqueue_add(q, 1, "team-b/p");
	CU_ASSERT_EQUAL(n.depth[ba], 3);
	CU_ASSERT_EQUAL(n.depth[bb], 1);
	CU_ASSERT_EQUAL(n.namespaces, 2);
	CU_ASSERT_EQUAL(n.flows, 3);
	for (int i = 0; i < 4; i++) {
		int kind;
		char *k = workqueue_get(q, &kind);
		workqueue_done(q, kind, k);
		free(k);
	}
	CU_ASSERT_EQUAL(n.depth[ba], 0);
	CU_ASSERT_EQUAL(n.depth[bb], 0);
	CU_ASSERT_EQUAL(n.queued[ba], 3);
	CU_ASSERT_EQUAL(n.queued[bb], 1);
	CU_ASSERT_EQUAL(n.namespaces, 0);
	CU_ASSERT_EQUAL(n.flows, 0);
	workqueue_free(q);
}

/* Timers too: due keys of the low lane are served fairly across namespaces. */
static void test_fair_timers(void)
{
	struct workqueue *q = workqueue_new();
	char key[32];
	for (int i = 0; i < 200; i++) {
		snprintf(key, sizeof key, "noisy/t%d", i);
		workqueue_add_after_low(q, 0, key, 1);
	}
	workqueue_add_after_low(q, 0, "victim/t", 2);
	usleep(20 * 1000);
	char first = next_ns(q), second = next_ns(q);
	CU_ASSERT(first == 'v' || second == 'v');
	workqueue_free(q);
}

/* The spam filter's buckets: 25 at once per key, one more every 300 s, keys
 * independent, the least recently used forgotten beyond the cap. */
/* The low lane: handed out only when no ordinary key is ready, at most the
 * limit at once; an ordinary add moves a key out of it. */
static void test_low_lane(void)
{
	struct workqueue *q = workqueue_new();
	workqueue_set_low_limit(q, 2);
	workqueue_add_after_low(q, 0, "ns/l1", 1);
	workqueue_add_after_low(q, 0, "ns/l2", 1);
	workqueue_add_after_low(q, 0, "ns/l3", 1);
	workqueue_add_after_low(q, 0, "ns/l4", 1);
	usleep(20 * 1000);
	workqueue_add(q, 0, "ns/a");
	workqueue_add(q, 0, "ns/l4"); /* moved to the ordinary lane */
	char *k1 = workqueue_get(q, NULL), *k2 = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(k1, "ns/a");
	CU_ASSERT_STRING_EQUAL(k2, "ns/l4");
	char *l1 = workqueue_get(q, NULL), *l2 = workqueue_get(q, NULL);
	CU_ASSERT(!strncmp(l1, "ns/l", 4) && !strncmp(l2, "ns/l", 4) && strcmp(l1, l2) && strcmp(l1, "ns/l4") &&
		  strcmp(l2, "ns/l4"));
	/* two low keys in flight: the third waits, an ordinary one does not */
	CU_ASSERT_EQUAL(workqueue_len(q), 1);
	workqueue_add(q, 0, "ns/b");
	char *b = workqueue_get(q, NULL);
	CU_ASSERT_STRING_EQUAL(b, "ns/b");
	workqueue_done(q, 0, l1);
	char *l3 = workqueue_get(q, NULL);
	CU_ASSERT(!strncmp(l3, "ns/l", 4) && strcmp(l3, l1) && strcmp(l3, l2) && strcmp(l3, "ns/l4"));
	char *all[] = { k1, k2, l2, b, l3 };
	for (size_t i = 0; i < 5; i++) {
		workqueue_done(q, 0, all[i]);
		free(all[i]);
	}
	free(l1);
	CU_ASSERT_EQUAL(workqueue_len(q), 0);
	workqueue_shutdown(q);
	CU_ASSERT_PTR_NULL(workqueue_get(q, NULL));
	workqueue_free(q);
}

/* The low lane is served when no ordinary key is ready, and yet never held
 * back for good: under a steady backlog of ordinary keys (workers always
 * finding one ready), a low key due waits at most about a quarter second. */
static void test_low_lane_not_starved(void)
{
	struct workqueue *q = workqueue_new();
	workqueue_set_low_limit(q, 1);
	workqueue_set_caps(q, 1, 1);
	workqueue_add(q, 0, "a/1");
	workqueue_add(q, 0, "b/1");
	workqueue_add_after_low(q, 0, "c/expiry", 1);
	usleep(5 * 1000);
	int64_t t0 = ktime_mono_ms(), served_at = -1;
	while (ktime_mono_ms() - t0 < 2000 && served_at < 0) {
		char *k = workqueue_get(q, NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(k);
		if (!strcmp(k, "c/expiry"))
			served_at = ktime_mono_ms() - t0;
		workqueue_done(q, 0, k);
		if (strcmp(k, "c/expiry"))
			workqueue_add(q, 0, k); /* another key of the backlog, ready again */
		free(k);
	}
	if (served_at < 0 || served_at > 600)
		printf("\n    low key served after %lld ms (-1: not in 2 s) ", (long long)served_at);
	CU_ASSERT(served_at >= 0 && served_at <= 600);
	workqueue_shutdown(q);
	workqueue_free(q);
}

/* A token bucket is full once what was taken (and owed) came back. */
static void test_token_bucket_full(void)
{
	struct token_bucket tb;
	token_bucket_init(&tb, 10, 2);
	CU_ASSERT_TRUE(token_bucket_full(&tb));
	CU_ASSERT_EQUAL(token_bucket_reserve(&tb), 0);
	CU_ASSERT_EQUAL(token_bucket_reserve(&tb), 0);
	CU_ASSERT(token_bucket_reserve(&tb) > 0); /* owes one */
	CU_ASSERT_FALSE(token_bucket_full(&tb));
	usleep(150 * 1000); /* 1.5 of the 3 tokens back */
	CU_ASSERT_FALSE(token_bucket_full(&tb));
	usleep(200 * 1000);
	CU_ASSERT_TRUE(token_bucket_full(&tb));
	token_bucket_release(&tb);
}

static void test_bucket_set(void)
{
	struct bucket_set *s = bucket_set_new(1.0 / 300, 25, 3);
	int n = 0;
	for (int i = 0; i < 30; i++)
		n += bucket_set_try(s, "a", 1000);
	CU_ASSERT_EQUAL(n, 25);
	CU_ASSERT_EQUAL(bucket_set_try(s, "b", 1000), 1);
	CU_ASSERT_EQUAL(bucket_set_try(s, "a", 1000 + 299000), 0);
	CU_ASSERT_EQUAL(bucket_set_try(s, "a", 1000 + 300000), 1);
	CU_ASSERT_EQUAL(bucket_set_try(s, "a", 1000 + 300000), 0);
	bucket_set_try(s, "c", 2000);
	bucket_set_try(s, "d", 2000); /* evicts b, the least recently used */
	CU_ASSERT_EQUAL(bucket_set_size(s), 3);
	CU_ASSERT_EQUAL(bucket_set_try(s, "a", 1000 + 300000), 0); /* a was kept: still empty */
	bucket_set_free(s);
}

void register_kube_workqueue_tests(void)
{
	SBX_SUITE("kube/workqueue", { "low lane: after ordinary work, capped", test_low_lane },
		  { "low lane not starved by a backlog", test_low_lane_not_starved },
		  { "fair: another namespace's first key is served next", test_fair_namespaces },
		  { "fair: timers of the low lane too", test_fair_timers },
		  { "fair: owners within a namespace; re-adds keep their flow", test_fair_owners },
		  { "fifo order: the baseline", test_fifo },
		  { "fair: caps per namespace and per flow", test_fair_caps },
		  { "fair: shared caps while another tenant has keys", test_shared_caps },
		  { "fair: shared caps hold back a backlog only", test_shared_caps_backlogged_only },
		  { "fair: a shared rate spaces a backlog's starts", test_shared_rate },
		  { "metrics per namespace bucket", test_ns_metrics },
		  { "dedup and re-add while processing", test_dedup },
		  { "typed items: one key of two kinds", test_kinds },
		  { "4 workers never share a key", test_one_worker_per_key },
		  { "backoff 5,10,20.. and forget", test_backoff },
		  { "rate-limited delivery", test_rate_limited_delivery },
		  { "add_after ordering", test_add_after_order },
		  { "shutdown: nothing more handed out; getters woken", test_shutdown },
		  { "shutdown hands out nothing of a backlog", test_shutdown_backlog },
		  { "delayed add wakes a blocked getter", test_delayed_wakes_blocked_getter },
		  { "overall bucket per namespace", test_bucket_per_namespace },
		  { "overall buckets forgotten once full", test_buckets_forgotten_when_full },
		  { "Retry-After is a floor", test_rate_limited_min },
		  { "Retry-After floor, metrics callbacks", test_retry_after_min },
		  { "Retry-After capped at the backoff's maximum", test_retry_after_capped },
		  { "token bucket: full once all came back", test_token_bucket_full },
		  { "per-key token buckets (spam filter)", test_bucket_set });
}
