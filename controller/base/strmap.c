#include "base/strmap.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "base/xmalloc.h"

struct entry {
	char key[STRMAP_KEY_MAX + 1];
	UT_hash_handle hh;
	max_align_t value[]; /* value_size bytes, aligned for any value */
};

struct strmap {
	pthread_mutex_t lock;
	size_t value_size;
	struct entry *map;
};

struct strmap *strmap_new(size_t value_size)
{
	struct strmap *m = xcalloc(1, sizeof *m);
	pthread_mutex_init(&m->lock, NULL);
	m->value_size = value_size;
	return m;
}

void strmap_free(struct strmap *m)
{
	if (!m)
		return;
	struct entry *e, *tmp;
	HASH_ITER(hh, m->map, e, tmp)
	{
		HASH_DEL(m->map, e);
		free(e);
	}
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void strmap_lock(struct strmap *m)
{
	pthread_mutex_lock(&m->lock);
}

void strmap_unlock(struct strmap *m)
{
	pthread_mutex_unlock(&m->lock);
}

void *strmap_get(struct strmap *m, const char *key)
{
	struct entry *e;
	HASH_FIND_STR(m->map, key, e);
	return e ? e->value : NULL;
}

void *strmap_put(struct strmap *m, const char *key, int *created)
{
	struct entry *e;
	if (created)
		*created = 0;
	size_t n = strlen(key);
	if (n > STRMAP_KEY_MAX)
		return NULL;
	HASH_FIND_STR(m->map, key, e);
	if (!e) {
		e = xcalloc(1, sizeof *e + m->value_size);
		memcpy(e->key, key, n + 1);
		HASH_ADD_STR(m->map, key, e);
		if (created)
			*created = 1;
	}
	return e->value;
}

void strmap_del(struct strmap *m, const char *key)
{
	struct entry *e;
	HASH_FIND_STR(m->map, key, e);
	if (e) {
		HASH_DEL(m->map, e);
		free(e);
	}
}

void strmap_sweep(struct strmap *m, int (*drop)(const void *value, void *ctx), void *ctx)
{
	struct entry *e, *tmp;
	HASH_ITER(hh, m->map, e, tmp)
	{
		if (drop(e->value, ctx)) {
			HASH_DEL(m->map, e);
			free(e);
		}
	}
}

size_t strmap_count(struct strmap *m)
{
	return HASH_COUNT(m->map);
}
