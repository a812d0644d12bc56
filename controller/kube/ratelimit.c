#include "kube/ratelimit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "base/xmalloc.h"

#include "base/ktime.h"

void token_bucket_init(struct token_bucket *tb, double rate, int burst)
{
	pthread_mutex_init(&tb->mu, NULL);
	tb->rate = rate;
	tb->burst = burst > 0 ? burst : 1;
	tb->tokens = tb->burst;
	tb->last_ms = ktime_mono_ms();
	tb->last_act_ms = tb->last_ms;
}

void token_bucket_release(struct token_bucket *tb)
{
	pthread_mutex_destroy(&tb->mu);
}

/* Adds the tokens earned since the last call. Caller holds mu. */
static void refill(struct token_bucket *tb, int64_t now)
{
	double add = (double)(now - tb->last_ms) * tb->rate / 1000.0;
	tb->last_ms = now;
	tb->tokens = fmin(tb->burst, tb->tokens + add);
}

int64_t token_bucket_reserve(struct token_bucket *tb)
{
	return token_bucket_reserve_within(tb, -1);
}

int64_t token_bucket_reserve_within(struct token_bucket *tb, int64_t max_wait_ms)
{
	if (tb->rate <= 0)
		return 0;
	pthread_mutex_lock(&tb->mu);
	int64_t now = ktime_mono_ms();
	refill(tb, now);
	double left = tb->tokens - 1.0;
	int64_t wait = left >= 0 ? 0 : (int64_t)ceil(-left * 1000.0 / tb->rate);
	if (max_wait_ms >= 0 && wait > max_wait_ms) {
		pthread_mutex_unlock(&tb->mu);
		return -1;
	}
	tb->tokens = left;
	if (now + wait > tb->last_act_ms)
		tb->last_act_ms = now + wait;
	pthread_mutex_unlock(&tb->mu);
	return wait;
}

void token_bucket_cancel(struct token_bucket *tb, int64_t act_ms)
{
	if (tb->rate <= 0)
		return;
	pthread_mutex_lock(&tb->mu);
	int64_t now = ktime_mono_ms();
	if (act_ms > now) {
		/* Reservations made after this one were spaced behind it: as much
		 * of its token as they have counted on stays taken. */
		double restore = 1.0 - (double)(tb->last_act_ms - act_ms) * tb->rate / 1000.0;
		if (restore > 0) {
			refill(tb, now);
			tb->tokens = fmin(tb->burst, tb->tokens + restore);
			if (tb->last_act_ms == act_ms)
				tb->last_act_ms = act_ms - (int64_t)(1000.0 / tb->rate);
		}
	}
	pthread_mutex_unlock(&tb->mu);
}

int token_bucket_try(struct token_bucket *tb)
{
	if (tb->rate <= 0)
		return 1;
	pthread_mutex_lock(&tb->mu);
	refill(tb, ktime_mono_ms());
	int ok = tb->tokens >= 1.0;
	if (ok)
		tb->tokens -= 1.0;
	pthread_mutex_unlock(&tb->mu);
	return ok;
}

int token_bucket_full(struct token_bucket *tb)
{
	if (tb->rate <= 0)
		return 1;
	pthread_mutex_lock(&tb->mu);
	refill(tb, ktime_mono_ms());
	int full = tb->tokens >= tb->burst;
	pthread_mutex_unlock(&tb->mu);
	return full;
}

struct keyed {
	char *key;
	double tokens;
	int64_t last_ms;
	UT_hash_handle hh;
};

struct bucket_set {
	double rate, burst;
	size_t max_keys;
	struct keyed *map; /* insertion order = least recently used first */
};

struct bucket_set *bucket_set_new(double rate, int burst, size_t max_keys)
{
	struct bucket_set *s = xcalloc(1, sizeof *s);
	s->rate = rate;
	s->burst = burst > 0 ? burst : 1;
	s->max_keys = max_keys ? max_keys : 1;
	return s;
}

static void keyed_del(struct bucket_set *s, struct keyed *k)
{
	HASH_DEL(s->map, k);
	free(k->key);
	free(k);
}

void bucket_set_free(struct bucket_set *s)
{
	if (!s)
		return;
	struct keyed *k, *t;
	HASH_ITER(hh, s->map, k, t)
	{
		keyed_del(s, k);
	}
	free(s);
}

int bucket_set_try(struct bucket_set *s, const char *key, int64_t now_ms)
{
	struct keyed *k;
	HASH_FIND_STR(s->map, key, k);
	if (k) {
		HASH_DEL(s->map, k); /* re-added below: now the most recently used */
		double add = (double)(now_ms - k->last_ms) * s->rate / 1000.0;
		k->tokens = fmin(s->burst, k->tokens + (add > 0 ? add : 0));
	} else {
		if (HASH_COUNT(s->map) >= s->max_keys)
			keyed_del(s, s->map);
		k = xcalloc(1, sizeof *k);
		k->key = xstrdup(key);
		k->tokens = s->burst;
	}
	k->last_ms = now_ms;
	HASH_ADD_KEYPTR(hh, s->map, k->key, strlen(k->key), k);
	if (k->tokens < 1.0)
		return 0;
	k->tokens -= 1.0;
	return 1;
}

size_t bucket_set_size(const struct bucket_set *s)
{
	return HASH_COUNT(s->map);
}
