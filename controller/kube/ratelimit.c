#include "kube/ratelimit.h"

#include <math.h>

#include "kube/ktime.h"

void token_bucket_init(struct token_bucket *tb, double rate, int burst)
{
	pthread_mutex_init(&tb->mu, NULL);
	tb->rate = rate;
	tb->burst = burst > 0 ? burst : 1;
	tb->tokens = tb->burst;
	tb->last_ms = ktime_mono_ms();
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
	if (tb->rate <= 0)
		return 0;
	pthread_mutex_lock(&tb->mu);
	refill(tb, ktime_mono_ms());
	tb->tokens -= 1.0;
	int64_t wait = tb->tokens >= 0 ? 0 : (int64_t)ceil(-tb->tokens * 1000.0 / tb->rate);
	pthread_mutex_unlock(&tb->mu);
	return wait;
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
