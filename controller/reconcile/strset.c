#include "reconcile/strset.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <uthash.h>

#include "base/ktime.h"
#include "base/xmalloc.h"

struct strset_entry {
	char key[64];
	int64_t until_ms; /* 0: until deleted */
	UT_hash_handle hh;
};

struct sbx_strset {
	pthread_mutex_t lock;
	struct strset_entry *set;
	unsigned int timed_adds; /* sbx_strset_add_for calls, for the sweep's pace */
};

struct sbx_strset *sbx_strset_new(void)
{
	struct sbx_strset *f = xcalloc(1, sizeof *f);
	pthread_mutex_init(&f->lock, NULL);
	return f;
}

void sbx_strset_free(struct sbx_strset *f)
{
	if (!f)
		return;
	struct strset_entry *e, *tmp;
	HASH_ITER(hh, f->set, e, tmp)
	{
		HASH_DEL(f->set, e);
		free(e);
	}
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/* Adds key; returns 1 when it was not there (the caller now owns it), 0 when
 * it already was. */
int sbx_strset_add(struct sbx_strset *f, const char *key)
{
	struct strset_entry *e;
	int added = 0;
	pthread_mutex_lock(&f->lock);
	HASH_FIND_STR(f->set, key, e);
	if (!e) {
		e = xcalloc(1, sizeof *e);
		snprintf(e->key, sizeof e->key, "%s", key);
		HASH_ADD_STR(f->set, key, e);
		added = 1;
	}
	pthread_mutex_unlock(&f->lock);
	return added;
}

/* Drops the entries whose time is up (the lock held). */
static void sweep(struct sbx_strset *f, int64_t now)
{
	struct strset_entry *e, *tmp;
	HASH_ITER(hh, f->set, e, tmp)
	{
		if (e->until_ms && e->until_ms <= now) {
			HASH_DEL(f->set, e);
			free(e);
		}
	}
}

void sbx_strset_add_for(struct sbx_strset *f, const char *key, long ttl_ms)
{
	struct strset_entry *e;
	int64_t now = ktime_mono_ms();
	pthread_mutex_lock(&f->lock);
	if (++f->timed_adds % 1024 == 0 && HASH_COUNT(f->set) >= 4096)
		sweep(f, now);
	HASH_FIND_STR(f->set, key, e);
	if (!e) {
		e = xcalloc(1, sizeof *e);
		snprintf(e->key, sizeof e->key, "%s", key);
		HASH_ADD_STR(f->set, key, e);
	}
	e->until_ms = now + (ttl_ms > 0 ? ttl_ms : 1);
	pthread_mutex_unlock(&f->lock);
}

int sbx_strset_has(struct sbx_strset *f, const char *key)
{
	struct strset_entry *e;
	pthread_mutex_lock(&f->lock);
	HASH_FIND_STR(f->set, key, e);
	if (e && e->until_ms && e->until_ms <= ktime_mono_ms()) {
		HASH_DEL(f->set, e);
		free(e);
		e = NULL;
	}
	pthread_mutex_unlock(&f->lock);
	return e != NULL;
}

void sbx_strset_del(struct sbx_strset *f, const char *key)
{
	struct strset_entry *e;
	pthread_mutex_lock(&f->lock);
	HASH_FIND_STR(f->set, key, e);
	if (e) {
		HASH_DEL(f->set, e);
		free(e);
	}
	pthread_mutex_unlock(&f->lock);
}
