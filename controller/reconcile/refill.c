/* The warm refill budget, shared fairly (refill.h). */
#include "reconcile/refill.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "base/xmalloc.h"

/* How many turns a namespace or pool may be ahead of the one furthest
 * behind that asks too. */
#define SLACK 1

struct turns {
	char *key;	  /* namespace, or "<namespace>/<pool>" */
	struct turns *ns; /* a pool's namespace entry (NULL for namespaces) */
	long long served; /* turns taken */
	int64_t last_ms;  /* last asked */
	int left;	  /* stopped asking (new, or its create was refused) */
	int active_pools; /* scratch: a namespace's pools asking now */
	UT_hash_handle hh;
};

struct sbx_refill {
	pthread_mutex_t mu;
	double rate, burst, tokens;
	int64_t tokens_ms;
	struct turns *nss, *pools;
	int64_t swept_ms;
};

struct sbx_refill *sbx_refill_new(double rate, int burst, int64_t now_ms)
{
	struct sbx_refill *r = xcalloc(1, sizeof *r);
	pthread_mutex_init(&r->mu, NULL);
	r->rate = rate > 0 ? rate : 1;
	r->burst = burst > 0 ? burst : 1;
	r->tokens = r->burst;
	r->tokens_ms = now_ms;
	r->swept_ms = now_ms;
	return r;
}

static void drop(struct turns **map, struct turns *t)
{
	HASH_DEL(*map, t);
	free(t->key);
	free(t);
}

void sbx_refill_free(struct sbx_refill *r)
{
	if (!r)
		return;
	struct turns *t, *tmp;
	HASH_ITER(hh, r->pools, t, tmp)
	drop(&r->pools, t);
	HASH_ITER(hh, r->nss, t, tmp)
	drop(&r->nss, t);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

static struct turns *get(struct turns **map, const char *key, struct turns *ns)
{
	struct turns *t;
	HASH_FIND_STR(*map, key, t);
	if (!t) {
		t = xcalloc(1, sizeof *t);
		t->key = xstrdup(key);
		t->ns = ns;
		t->left = 1;
		HASH_ADD_KEYPTR(hh, *map, t->key, strlen(t->key), t);
	}
	return t;
}

static int asking(const struct turns *t, int64_t now_ms)
{
	return !t->left && now_ms - t->last_ms <= SBX_REFILL_ACTIVE_MS;
}

/* Forgets pools not heard of for SBX_REFILL_FORGET_MS, and namespaces left
 * without pools (at most once a second). */
static void sweep(struct sbx_refill *r, int64_t now_ms)
{
	if (now_ms - r->swept_ms < 1000)
		return;
	r->swept_ms = now_ms;
	struct turns *t, *tmp;
	HASH_ITER(hh, r->nss, t, tmp)
	t->active_pools = 0;
	HASH_ITER(hh, r->pools, t, tmp)
	{
		if (now_ms - t->last_ms > SBX_REFILL_FORGET_MS)
			drop(&r->pools, t);
		else
			t->ns->active_pools++; /* here: "has pools" */
	}
	HASH_ITER(hh, r->nss, t, tmp)
	{
		if (!t->active_pools)
			drop(&r->nss, t);
	}
}

int sbx_refill_take(struct sbx_refill *r, const char *ns, const char *pool, int64_t now_ms)
{
	char key[600];
	snprintf(key, sizeof key, "%s/%s", ns, pool);
	pthread_mutex_lock(&r->mu);
	sweep(r, now_ms);
	if (now_ms > r->tokens_ms) {
		r->tokens += (double)(now_ms - r->tokens_ms) * r->rate / 1000.0;
		if (r->tokens > r->burst)
			r->tokens = r->burst;
		r->tokens_ms = now_ms;
	}
	struct turns *n = get(&r->nss, ns, NULL), *p = get(&r->pools, key, n), *t, *tmp;
	/* The turns of those asking now: of the namespaces, and of the
	 * pools of this namespace (this pool's own aside, as it may come back). */
	int have_ns = 0, have_pool = 0;
	long long floor_ns = 0, floor_pool = 0;
	HASH_ITER(hh, r->nss, t, tmp)
	t->active_pools = 0;
	HASH_ITER(hh, r->pools, t, tmp)
	{
		if (t == p || !asking(t, now_ms))
			continue;
		t->ns->active_pools++;
		if (t->ns == n && (!have_pool || t->served < floor_pool)) {
			floor_pool = t->served;
			have_pool = 1;
		}
	}
	HASH_ITER(hh, r->nss, t, tmp)
	{
		if (t->active_pools && (t != n) && (!have_ns || t->served < floor_ns)) {
			floor_ns = t->served;
			have_ns = 1;
		}
	}
	/* Back to asking: at the turn of those that kept asking, never behind. */
	if (!asking(p, now_ms) && have_pool && p->served < floor_pool)
		p->served = floor_pool;
	if (!n->active_pools && !asking(p, now_ms) && have_ns && n->served < floor_ns)
		n->served = floor_ns;
	p->last_ms = now_ms;
	p->left = 0;
	int ok = (!have_ns || n->served <= floor_ns + SLACK) && (!have_pool || p->served <= floor_pool + SLACK) &&
		 r->tokens >= 1;
	if (ok) {
		r->tokens -= 1;
		n->served++;
		p->served++;
	}
	pthread_mutex_unlock(&r->mu);
	return ok;
}

void sbx_refill_refund(struct sbx_refill *r, const char *ns, const char *pool)
{
	char key[600];
	snprintf(key, sizeof key, "%s/%s", ns, pool);
	pthread_mutex_lock(&r->mu);
	r->tokens += 1;
	if (r->tokens > r->burst)
		r->tokens = r->burst;
	struct turns *p;
	HASH_FIND_STR(r->pools, key, p);
	if (p)
		p->left = 1;
	pthread_mutex_unlock(&r->mu);
}

int sbx_refill_pools(struct sbx_refill *r)
{
	pthread_mutex_lock(&r->mu);
	int n = (int)HASH_COUNT(r->pools);
	pthread_mutex_unlock(&r->mu);
	return n;
}
