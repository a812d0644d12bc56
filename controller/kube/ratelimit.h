/* A token bucket (golang.org/x/time/rate style, reservation-based): tokens
 * refill at rate per second up to burst; taking one when none is left reserves
 * a future token and reports how long to wait for it. Thread-safe. */
#ifndef SBX_KUBE_RATELIMIT_H
#define SBX_KUBE_RATELIMIT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct token_bucket {
	pthread_mutex_t mu;
	double rate;   /* tokens per second; <= 0 means unlimited */
	double burst;  /* bucket size */
	double tokens; /* may go negative: reserved future tokens */
	int64_t last_ms;
	int64_t last_act_ms; /* when the latest reservation may act */
};

/* Fills a caller-owned bucket, initially full. */
void token_bucket_init(struct token_bucket *tb, double rate, int burst);
/* Frees the bucket's contents. */
void token_bucket_release(struct token_bucket *tb);
/* Takes one token, reserving a future one if the bucket is empty. Returns the
 * milliseconds the caller must wait before acting (0 = now). */
int64_t token_bucket_reserve(struct token_bucket *tb);
/* token_bucket_reserve that takes the token only if the wait is at most
 * max_wait_ms (x/time/rate's Wait with a context deadline): returns the
 * milliseconds to wait, or -1 when the wait would be longer (nothing is
 * taken then). A max_wait_ms below 0 takes it whatever the wait. */
int64_t token_bucket_reserve_within(struct token_bucket *tb, int64_t max_wait_ms);
/* Gives back a reservation that will not be used (its caller gave up
 * waiting), due at act_ms (monotonic: the reservation time plus its wait),
 * as x/time/rate's Reservation.Cancel: the token comes back, less what later
 * reservations have counted on since; nothing comes back once act_ms has
 * passed. */
void token_bucket_cancel(struct token_bucket *tb, int64_t act_ms);
/* Takes one token only if one is available now; returns 1 if taken, else 0
 * (and nothing is changed). */
int token_bucket_try(struct token_bucket *tb);
/* 1 when the bucket holds its whole burst now (no debt, nothing taken that
 * has not come back): it is then the same as a new one. */
int token_bucket_full(struct token_bucket *tb);

/* Token buckets by key (client-go's per-object spam filter): each key has
 * its own bucket, created full on first use; at most max_keys are kept, the
 * least recently used is forgotten first (it comes back full, as with
 * client-go's LRU). Not thread-safe: the caller serialises calls. */
struct bucket_set;

/* Returns a new set (caller frees with bucket_set_free). */
struct bucket_set *bucket_set_new(double rate, int burst, size_t max_keys);
void bucket_set_free(struct bucket_set *s);
/* Takes one token from key's bucket at now_ms (a monotonic clock); returns 1
 * if taken, 0 if the bucket is empty (nothing is changed then). */
int bucket_set_try(struct bucket_set *s, const char *key, int64_t now_ms);
/* Number of keys held. */
size_t bucket_set_size(const struct bucket_set *s);

#endif
