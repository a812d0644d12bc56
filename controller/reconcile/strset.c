#include "reconcile/strset.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/ktime.h"
#include "base/strmap.h"
#include "base/xmalloc.h"

struct member {
	int64_t until_ms; /* 0: until deleted */
};

struct sbx_strset {
	struct strmap *map;
	unsigned int timed_adds; /* sbx_strset_add_for calls, for the sweep's pace (under the map's lock) */
};

/* key cut to what an entry holds (strset.h: longer ones are truncated). */
static const char *cut(const char *key, char out[STRMAP_KEY_MAX + 1])
{
	snprintf(out, STRMAP_KEY_MAX + 1, "%s", key);
	return out;
}

struct sbx_strset *sbx_strset_new(void)
{
	struct sbx_strset *f = xcalloc(1, sizeof *f);
	f->map = strmap_new(sizeof(struct member));
	return f;
}

void sbx_strset_free(struct sbx_strset *f)
{
	if (!f)
		return;
	strmap_free(f->map);
	free(f);
}

int sbx_strset_add(struct sbx_strset *f, const char *key)
{
	char k[STRMAP_KEY_MAX + 1];
	int added;
	strmap_lock(f->map);
	strmap_put(f->map, cut(key, k), &added);
	strmap_unlock(f->map);
	return added;
}

/* Entries whose time is up at *now (int64_t). */
static int expired(const void *value, void *now)
{
	const struct member *m = value;
	return m->until_ms && m->until_ms <= *(int64_t *)now;
}

/* Adds or renews key for ttl_ms at now (the map's lock held); only when
 * it is not a member already if claim. Returns 1 when added or renewed. */
static int put_for(struct sbx_strset *f, const char *key, long ttl_ms, int64_t now, int claim)
{
	char k[STRMAP_KEY_MAX + 1];
	if (++f->timed_adds % 1024 == 0 && strmap_count(f->map) >= 4096)
		strmap_sweep(f->map, expired, &now);
	int added = 0;
	struct member *m = strmap_put(f->map, cut(key, k), &added);
	if (claim && !added && !expired(m, &now))
		return 0;
	m->until_ms = now + (ttl_ms > 0 ? ttl_ms : 1);
	return 1;
}

void sbx_strset_add_for(struct sbx_strset *f, const char *key, long ttl_ms)
{
	int64_t now = ktime_mono_ms();
	strmap_lock(f->map);
	put_for(f, key, ttl_ms, now, 0);
	strmap_unlock(f->map);
}

int sbx_strset_claim_for(struct sbx_strset *f, const char *key, long ttl_ms)
{
	int64_t now = ktime_mono_ms();
	strmap_lock(f->map);
	int r = put_for(f, key, ttl_ms, now, 1);
	strmap_unlock(f->map);
	return r;
}

int sbx_strset_has(struct sbx_strset *f, const char *key)
{
	char k[STRMAP_KEY_MAX + 1];
	strmap_lock(f->map);
	struct member *m = strmap_get(f->map, cut(key, k));
	if (m && m->until_ms && m->until_ms <= ktime_mono_ms()) {
		strmap_del(f->map, k);
		m = NULL;
	}
	strmap_unlock(f->map);
	return m != NULL;
}

void sbx_strset_del(struct sbx_strset *f, const char *key)
{
	char k[STRMAP_KEY_MAX + 1];
	strmap_lock(f->map);
	strmap_del(f->map, cut(key, k));
	strmap_unlock(f->map);
}
