/* A token bucket (golang.org/x/time/rate style, reservation-based): tokens
 * refill at rate per second up to burst; taking one when none is left reserves
 * a future token and reports how long to wait for it. Thread-safe. */
#ifndef SBX_KUBE_RATELIMIT_H
#define SBX_KUBE_RATELIMIT_H

#include <pthread.h>
#include <stdint.h>

struct token_bucket {
	pthread_mutex_t mu;
	double rate;   /* tokens per second; <= 0 means unlimited */
	double burst;  /* bucket size */
	double tokens; /* may go negative: reserved future tokens */
	int64_t last_ms;
};

/* Fills a caller-owned bucket, initially full. */
void token_bucket_init(struct token_bucket *tb, double rate, int burst);
/* Frees the bucket's contents. */
void token_bucket_release(struct token_bucket *tb);
/* Takes one token, reserving a future one if the bucket is empty. Returns the
 * milliseconds the caller must wait before acting (0 = now). */
int64_t token_bucket_reserve(struct token_bucket *tb);
/* Takes one token only if one is available now; returns 1 if taken, else 0
 * (and nothing is changed). */
int token_bucket_try(struct token_bucket *tb);

#endif
