#include "sandbox/strset.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <uthash.h>

#include "base/xmalloc.h"

struct strset_entry {
	char key[64];
	UT_hash_handle hh;
};

struct sbx_strset {
	pthread_mutex_t lock;
	struct strset_entry *set;
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
