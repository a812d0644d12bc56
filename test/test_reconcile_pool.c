/* Unit tests for the controller's pool bookkeeping (reconcile/pool.h), the
 * refill budget's turns (reconcile/refill.h) and its sets of short strings
 * (reconcile/strset.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <CUnit/CUnit.h>

#include "base/ktime.h"
#include "reconcile/pool.h"
#include "reconcile/refill.h"
#include "reconcile/strset.h"
#include "test_suites.h"

void register_reconcile_pool_tests(void); /* called from test_reconcile_all.c */

/* A namespace whose pool left: for a while it still claims through records. */
static void test_pool_gone(void)
{
	struct sbx_pool_state *s = sbx_pool_state_new(10);
	CU_ASSERT_FALSE(sbx_pool_gone_within(s, "team-a", 1000, 90));
	sbx_pool_gone(s, "team-a", 1000, 90);
	CU_ASSERT_TRUE(sbx_pool_gone_within(s, "team-a", 1089, 90));
	CU_ASSERT_FALSE(sbx_pool_gone_within(s, "team-a", 1090, 90));
	CU_ASSERT_FALSE(sbx_pool_gone_within(s, "team-b", 1000, 90));
	sbx_pool_state_free(s);
}

/* A namespace whose pool left longer ago than anyone asks about is
 * forgotten, so a controller serving short-lived namespaces (one pool per
 * agent session) does not keep one entry for each it ever saw. */
static void test_pool_gone_forgotten(void)
{
	struct sbx_pool_state *s = sbx_pool_state_new(10);
	char ns[32];
	for (int i = 0; i < 1000; i++) {
		snprintf(ns, sizeof ns, "session-%d", i);
		sbx_pool_gone(s, ns, 1000, 90);
	}
	sbx_pool_gone(s, "team-a", 1050, 90);
	CU_ASSERT_EQUAL(sbx_pool_gone_held(s), 1001);
	sbx_pool_gone(s, "team-b", 1090, 90);
	CU_ASSERT_EQUAL(sbx_pool_gone_held(s), 2); /* team-a (40 s ago) and team-b */
	CU_ASSERT_TRUE(sbx_pool_gone_within(s, "team-a", 1090, 90));
	CU_ASSERT_FALSE(sbx_pool_gone_within(s, "session-1", 1090, 90));
	sbx_pool_state_free(s);
}

/* A process that just started has not seen the pools that left while it was
 * away (or before it came up): while warm pods of a pool remain in a
 * namespace, it claims there through records, as if its pool had just gone
 * (a replica that still sees the pool can bind only a warm pod that exists).
 * Namespaces without one claim as before, at no extra request. */
static void test_pool_gone_after_a_restart(void)
{
	struct sbx_pool_state *s = sbx_pool_state_new(10);
	time_t now = time(NULL);
	CU_ASSERT_FALSE(sbx_pool_gone_within(s, "team-a", now, 90));
	sbx_pool_warm_pod(s, "team-a", 1); /* members of a pool it never saw */
	sbx_pool_warm_pod(s, "team-a", 1);
	CU_ASSERT_TRUE(sbx_pool_gone_within(s, "team-a", now, 90));
	CU_ASSERT_FALSE(sbx_pool_gone_within(s, "team-b", now, 90));
	sbx_pool_warm_pod(s, "team-a", -1);
	CU_ASSERT_TRUE(sbx_pool_gone_within(s, "team-a", now, 90));
	sbx_pool_warm_pod(s, "team-a", -1);
	CU_ASSERT_FALSE(sbx_pool_gone_within(s, "team-a", now, 90));
	sbx_pool_state_free(s);
}

/* A pool's template serves only once this process has seen it for the
 * settle time, on its own clock: from the first time it is looked at,
 * again for a new template, and again after a restart (a new state). */
static void test_pool_settled_on_its_own_clock(void)
{
	static const char uid[] = "6f1c2a8e-0000-4000-8000-000000000001";
	static const char fp1[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	static const char fp2[] = "f123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	struct sbx_pool_state *s = sbx_pool_state_new(10);
	CU_ASSERT_FALSE(sbx_pool_settled(s, uid, fp1, 150));
	ktime_sleep_ms(50);
	CU_ASSERT_FALSE(sbx_pool_settled(s, uid, fp1, 150));
	ktime_sleep_ms(150);
	CU_ASSERT_TRUE(sbx_pool_settled(s, uid, fp1, 150));
	CU_ASSERT_FALSE(sbx_pool_settled(s, uid, fp2, 150)); /* a new template starts over */
	sbx_pool_forget(s, uid);
	CU_ASSERT_FALSE(sbx_pool_settled(s, uid, fp1, 150)); /* forgotten with its pool */
	sbx_pool_state_free(s);
	s = sbx_pool_state_new(10);
	CU_ASSERT_FALSE(sbx_pool_settled(s, uid, fp2, 150)); /* a restart starts over */
	sbx_pool_state_free(s);
}

/* The settle clock is the present template's: a pool whose template goes
 * back to one it had before starts over (fp1, fp2, fp1 again: fp1 has been
 * in place since the last change, not since it was first seen), and a pool
 * whose template changes often holds one entry, not one per template it
 * ever had (a GitOps pipeline that sets a new image tag at each deploy). */
static void test_pool_settled_present_template(void)
{
	static const char uid[] = "6f1c2a8e-0000-4000-8000-000000000002";
	static const char fp1[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	static const char fp2[] = "f123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	struct sbx_pool_state *s = sbx_pool_state_new(10);
	CU_ASSERT_FALSE(sbx_pool_settled(s, uid, fp1, 100));
	ktime_sleep_ms(150);
	CU_ASSERT_TRUE(sbx_pool_settled(s, uid, fp1, 100));
	CU_ASSERT_FALSE(sbx_pool_settled(s, uid, fp2, 100));
	CU_ASSERT_FALSE(sbx_pool_settled(s, uid, fp1, 100)); /* back to fp1: in place since now */
	ktime_sleep_ms(150);
	CU_ASSERT_TRUE(sbx_pool_settled(s, uid, fp1, 100));
	char fp[65];
	for (int i = 0; i < 1000; i++) {
		snprintf(fp, sizeof fp, "%08x%056x", i, 0); /* apart in the first digits */
		sbx_pool_settled(s, uid, fp, 100);
	}
	CU_ASSERT_EQUAL(sbx_pool_seen_held(s), 1);
	sbx_pool_settled(s, "6f1c2a8e-0000-4000-8000-000000000003", fp1, 100);
	CU_ASSERT_EQUAL(sbx_pool_seen_held(s), 2); /* one per pool */
	sbx_pool_forget(s, uid);
	CU_ASSERT_EQUAL(sbx_pool_seen_held(s), 1);
	sbx_pool_state_free(s);
}

/* The timed members of a set (pods gone, pods released): a member until its
 * time is up, renewed by a second add, swept in bulk without touching the
 * untimed members. Each check has a margin far beyond a descheduled thread
 * (the renewal once got 20 ms, and a loaded machine took more). */
static void test_strset_timed_members(void)
{
	struct sbx_strset *s = sbx_strset_new();
	sbx_strset_add_for(s, "gone", 200);
	CU_ASSERT_TRUE(sbx_strset_has(s, "gone"));
	CU_ASSERT_FALSE(sbx_strset_has(s, "other"));
	CU_ASSERT_EQUAL(sbx_strset_add(s, "kept"), 1);
	ktime_sleep_ms(250);
	CU_ASSERT_FALSE(sbx_strset_has(s, "gone"));
	sbx_strset_add_for(s, "renewed", 100);
	ktime_sleep_ms(50);
	sbx_strset_add_for(s, "renewed", 5000); /* renewed: past the first time, a member still */
	ktime_sleep_ms(100);
	CU_ASSERT_TRUE(sbx_strset_has(s, "renewed"));
	char key[32];
	for (int i = 0; i < 6000; i++) {
		snprintf(key, sizeof key, "k%d", i);
		sbx_strset_add_for(s, key, 1);
	}
	ktime_sleep_ms(5);
	for (int i = 0; i < 3000; i++)
		sbx_strset_add_for(s, "again", 1000);
	CU_ASSERT_TRUE(sbx_strset_has(s, "again"));
	CU_ASSERT_FALSE(sbx_strset_has(s, "k10"));
	CU_ASSERT_EQUAL(sbx_strset_add(s, "kept"), 0); /* untimed: never swept */
	sbx_strset_free(s);
}

/* A claim adds a key only when it is not a member (or its time is up), in
 * one step: of threads that claim one key at once, one gets it (the
 * workspace preparation's creator: wsgate.c). */
struct claim_race {
	struct sbx_strset *s;
	pthread_barrier_t *start;
	int got;
};

static void *claim_one(void *arg)
{
	struct claim_race *r = arg;
	pthread_barrier_wait(r->start);
	r->got = sbx_strset_claim_for(r->s, "prep", 10000);
	return NULL;
}

static void test_strset_claim(void)
{
	struct sbx_strset *s = sbx_strset_new();
	CU_ASSERT_EQUAL(sbx_strset_claim_for(s, "a", 100), 1);
	CU_ASSERT_EQUAL(sbx_strset_claim_for(s, "a", 100), 0);
	CU_ASSERT_TRUE(sbx_strset_has(s, "a"));
	ktime_sleep_ms(250);
	CU_ASSERT_EQUAL(sbx_strset_claim_for(s, "a", 5000), 1); /* its time was up */
	CU_ASSERT_EQUAL(sbx_strset_add(s, "untimed"), 1);
	CU_ASSERT_EQUAL(sbx_strset_claim_for(s, "untimed", 100), 0);
	sbx_strset_del(s, "a");
	CU_ASSERT_EQUAL(sbx_strset_claim_for(s, "a", 100), 1);
	enum { N = 8,
	       ROUNDS = 200 };
	for (int round = 0; round < ROUNDS; round++) {
		pthread_barrier_t start;
		pthread_barrier_init(&start, NULL, N);
		struct claim_race r[N];
		pthread_t t[N];
		for (int i = 0; i < N; i++) {
			r[i] = (struct claim_race){ s, &start, 0 };
			pthread_create(&t[i], NULL, claim_one, &r[i]);
		}
		int got = 0;
		for (int i = 0; i < N; i++) {
			pthread_join(t[i], NULL);
			got += r[i].got;
		}
		pthread_barrier_destroy(&start);
		CU_ASSERT_EQUAL(got, 1);
		sbx_strset_del(s, "prep");
	}
	sbx_strset_free(s);
}

/* Every pool asks every 100 ms for 20 s (refill.h's time is passed in):
 * the grants of each namespace and of each pool of namespace "many". */
struct refill_run {
	int ns_one, ns_many, many_pool[20];
};

static struct refill_run refill_simulate(int many_pools, int one_blocked)
{
	struct refill_run out = { 0 };
	struct sbx_refill *r = sbx_refill_new(10, 10, 0);
	char pool[16];
	for (int64_t t = 0; t < 20000; t += 100) {
		for (int i = 0; i < many_pools; i++) {
			snprintf(pool, sizeof pool, "p%d", i);
			if (sbx_refill_take(r, "many", pool, t)) {
				out.ns_many++;
				out.many_pool[i]++;
				if (one_blocked) /* every create of "many" refused */
					sbx_refill_refund(r, "many", pool);
			}
		}
		if (sbx_refill_take(r, "one", "q", t))
			out.ns_one++;
	}
	sbx_refill_free(r);
	return out;
}

/* Turns are fair across namespaces (twenty pools of one get what the one
 * pool of another gets) and across the pools of a namespace; refused
 * creates give their tokens back. */
static void test_refill_fair_turns(void)
{
	struct refill_run x = refill_simulate(20, 0);
	/* 10/s for 20 s plus the burst: 210 grants, about half each */
	CU_ASSERT_TRUE(x.ns_one + x.ns_many >= 200 && x.ns_one + x.ns_many <= 210);
	CU_ASSERT_TRUE(x.ns_one >= 95 && x.ns_one <= 110);
	int lo = x.many_pool[0], hi = x.many_pool[0];
	for (int i = 1; i < 20; i++) {
		lo = x.many_pool[i] < lo ? x.many_pool[i] : lo;
		hi = x.many_pool[i] > hi ? x.many_pool[i] : hi;
	}
	CU_ASSERT_TRUE(hi - lo <= 3); /* a pool may take while one turn ahead: two after its take */
	/* "many"'s creates all refused, each given back: "one" is held up by
	 * nothing (one pod a tick it asks for, up to the budget) */
	x = refill_simulate(20, 1);
	CU_ASSERT_TRUE(x.ns_one >= 195);
}

/* A namespace that stops asking holds no one back, and one that comes back
 * after the others went on alone takes its turn among them, not all the
 * turns it missed. */
static void test_refill_comes_back_at_the_turn(void)
{
	struct sbx_refill *r = sbx_refill_new(1000, 1000, 0);
	CU_ASSERT_TRUE(sbx_refill_take(r, "a", "p", 0));
	CU_ASSERT_TRUE(sbx_refill_take(r, "b", "q", 0));
	/* b asked once: a takes while at most one turn ahead of it, then waits */
	int a = 0, b = 0;
	for (int64_t t = 1; t <= 10; t++)
		a += sbx_refill_take(r, "a", "p", t);
	CU_ASSERT_EQUAL(a, 3);
	/* b stops asking: a goes on once b counts as gone */
	a = 0;
	for (int64_t t = SBX_REFILL_ACTIVE_MS + 11; t < SBX_REFILL_ACTIVE_MS + 111; t++)
		a += sbx_refill_take(r, "a", "p", t);
	CU_ASSERT_EQUAL(a, 100);
	/* b comes back: they alternate (b saved no turns while away) */
	a = 0;
	for (int64_t t = 2000; t < 2020; t++) {
		b += sbx_refill_take(r, "b", "q", t);
		a += sbx_refill_take(r, "a", "p", t);
	}
	CU_ASSERT_EQUAL(a, 20);
	CU_ASSERT_EQUAL(b, 20);
	/* and when only b may go (a is one turn ahead), a waits for b */
	sbx_refill_take(r, "a", "p", 2020);
	sbx_refill_take(r, "a", "p", 2021);
	CU_ASSERT_FALSE(sbx_refill_take(r, "a", "p", 2022));
	/* a refund gives the token back: at a budget of 1, the next take passes */
	sbx_refill_free(r);
	r = sbx_refill_new(1, 1, 0);
	CU_ASSERT_TRUE(sbx_refill_take(r, "a", "p", 0));
	CU_ASSERT_FALSE(sbx_refill_take(r, "b", "q", 0));
	sbx_refill_refund(r, "a", "p");
	CU_ASSERT_TRUE(sbx_refill_take(r, "b", "q", 1));
	/* pools not heard of for a minute are forgotten */
	CU_ASSERT_EQUAL(sbx_refill_pools(r), 2);
	sbx_refill_take(r, "c", "x", SBX_REFILL_FORGET_MS + 2000);
	CU_ASSERT_EQUAL(sbx_refill_pools(r), 1);
	sbx_refill_free(r);
}

void register_reconcile_pool_tests(void)
{
	SBX_SUITE("reconcile/pool", { "pools gone", test_pool_gone }, { "pools gone: forgotten after keep_s", test_pool_gone_forgotten },
		  { "pools gone: after a restart", test_pool_gone_after_a_restart },
		  { "pools settled on this process's clock", test_pool_settled_on_its_own_clock },
		  { "pools settled: the present template", test_pool_settled_present_template }, { "timed set members", test_strset_timed_members },
		  { "set claims: one of racing threads", test_strset_claim },
		  { "refill: fair turns", test_refill_fair_turns },
		  { "refill: back at the turn", test_refill_comes_back_at_the_turn });
}
