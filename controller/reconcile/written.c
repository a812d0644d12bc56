#include "reconcile/written.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "base/ktime.h"
#include "base/xmalloc.h"

#define WRITTEN_TTL_MS 10000
#define WRITTEN_SWEEP 256

struct written_entry {
	char uid[64];
	char rv[32];
	int64_t at_ms;
	int deferred; /* a reconcile waited for this write */
	UT_hash_handle hh;
};

struct sbx_written {
	pthread_mutex_t lock;
	struct written_entry *map;
	unsigned puts;
};

struct sbx_written *sbx_written_new(void)
{
	struct sbx_written *w = xcalloc(1, sizeof *w);
	pthread_mutex_init(&w->lock, NULL);
	return w;
}

void sbx_written_free(struct sbx_written *w)
{
	if (!w)
		return;
	struct written_entry *e, *tmp;
	HASH_ITER(hh, w->map, e, tmp)
	{
		HASH_DEL(w->map, e);
		free(e);
	}
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* Remembers that uid's status was written at resourceVersion rv. */
void sbx_written_put(struct sbx_written *w, const char *uid, const char *rv)
{
	if (!w || !uid || !rv || strlen(uid) >= sizeof ((struct written_entry *)0)->uid ||
	    strlen(rv) >= sizeof ((struct written_entry *)0)->rv)
		return;
	pthread_mutex_lock(&w->lock);
	struct written_entry *e;
	HASH_FIND_STR(w->map, uid, e);
	if (!e) {
		e = xcalloc(1, sizeof *e);
		snprintf(e->uid, sizeof e->uid, "%s", uid);
		HASH_ADD_STR(w->map, uid, e);
	}
	snprintf(e->rv, sizeof e->rv, "%s", rv);
	e->at_ms = ktime_mono_ms();
	e->deferred = 0;
	if (++w->puts % WRITTEN_SWEEP == 0) {
		struct written_entry *tmp;
		HASH_ITER(hh, w->map, e, tmp)
		{
			if (e->at_ms + WRITTEN_TTL_MS <= ktime_mono_ms()) {
				HASH_DEL(w->map, e);
				free(e);
			}
		}
	}
	pthread_mutex_unlock(&w->lock);
}

/* The cache holds uid at resourceVersion rv (NULL: the Sandbox is gone):
 * forgets the entry once the cache shows our write (or it expired). Returns 1
 * when the cache still lags behind our last write. */
int sbx_written_lagging(struct sbx_written *w, const char *uid, const char *rv)
{
	if (!w || !uid)
		return 0;
	int lag = 0;
	pthread_mutex_lock(&w->lock);
	struct written_entry *e;
	HASH_FIND_STR(w->map, uid, e);
	if (e) {
		lag = rv && strcmp(e->rv, rv) && ktime_mono_ms() - e->at_ms < WRITTEN_TTL_MS;
		if (lag) {
			e->deferred = 1;
		} else {
			HASH_DEL(w->map, e);
			free(e);
		}
	}
	pthread_mutex_unlock(&w->lock);
	return lag;
}

/* The cache now holds uid at resourceVersion rv. Returns 1 when that is
 * exactly our last write and no reconcile waited for it: the object says what
 * the reconcile that wrote it decided, so it needs no reconcile of its own
 * (what changes later, a pod or another writer, brings its own event).
 * Otherwise forgets the entry as written_lagging does and returns 0. */
int sbx_written_arrived(struct sbx_written *w, const char *uid, const char *rv)
{
	if (!w || !uid || !rv)
		return 0;
	int own = 0;
	pthread_mutex_lock(&w->lock);
	struct written_entry *e;
	HASH_FIND_STR(w->map, uid, e);
	if (e && (!strcmp(e->rv, rv) || ktime_mono_ms() - e->at_ms >= WRITTEN_TTL_MS)) {
		own = !strcmp(e->rv, rv) && !e->deferred;
		HASH_DEL(w->map, e);
		free(e);
	}
	pthread_mutex_unlock(&w->lock);
	return own;
}
