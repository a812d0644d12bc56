#include "reconcile/written.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ktime.h"
#include "base/strmap.h"
#include "base/xmalloc.h"

#define WRITTEN_TTL_MS 10000
#define WRITTEN_SWEEP 256

struct written_entry {
	char rv[32];
	int64_t at_ms;
	int deferred; /* a reconcile waited for this write */
};

struct sbx_written {
	struct strmap *map; /* by uid */
	unsigned puts;	    /* under the map's lock */
};

struct sbx_written *sbx_written_new(void)
{
	struct sbx_written *w = xcalloc(1, sizeof *w);
	w->map = strmap_new(sizeof(struct written_entry));
	return w;
}

void sbx_written_free(struct sbx_written *w)
{
	if (!w)
		return;
	strmap_free(w->map);
	free(w);
}

/* Entries older than the TTL at *now (int64_t). */
static int stale(const void *value, void *now)
{
	const struct written_entry *e = value;
	return e->at_ms + WRITTEN_TTL_MS <= *(int64_t *)now;
}

/* Remembers that uid's status was written at resourceVersion rv. */
void sbx_written_put(struct sbx_written *w, const char *uid, const char *rv)
{
	if (!w || !uid || !rv || strlen(uid) > STRMAP_KEY_MAX || strlen(rv) >= sizeof((struct written_entry *)0)->rv)
		return;
	strmap_lock(w->map);
	struct written_entry *e = strmap_put(w->map, uid, NULL);
	snprintf(e->rv, sizeof e->rv, "%s", rv);
	e->at_ms = ktime_mono_ms();
	e->deferred = 0;
	if (++w->puts % WRITTEN_SWEEP == 0) {
		int64_t now = ktime_mono_ms();
		strmap_sweep(w->map, stale, &now);
	}
	strmap_unlock(w->map);
}

/* The cache holds uid at resourceVersion rv (NULL: the Sandbox is gone):
 * forgets the entry once the cache shows our write (or it expired). Returns 1
 * when the cache still lags behind our last write. */
int sbx_written_lagging(struct sbx_written *w, const char *uid, const char *rv)
{
	if (!w || !uid)
		return 0;
	int lag = 0;
	strmap_lock(w->map);
	struct written_entry *e = strmap_get(w->map, uid);
	if (e) {
		lag = rv && strcmp(e->rv, rv) && ktime_mono_ms() - e->at_ms < WRITTEN_TTL_MS;
		if (lag)
			e->deferred = 1;
		else
			strmap_del(w->map, uid);
	}
	strmap_unlock(w->map);
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
	strmap_lock(w->map);
	struct written_entry *e = strmap_get(w->map, uid);
	if (e && (!strcmp(e->rv, rv) || ktime_mono_ms() - e->at_ms >= WRITTEN_TTL_MS)) {
		own = !strcmp(e->rv, rv) && !e->deferred;
		strmap_del(w->map, uid);
	}
	strmap_unlock(w->map);
	return own;
}

/* Metadata less its resourceVersion (a copy; caller frees). */
static cJSON *meta_sans_rv(const cJSON *o)
{
	cJSON *m = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(o, "metadata"), 1);
	cJSON_DeleteItemFromObjectCaseSensitive(m, "resourceVersion");
	return m;
}

int sbx_changed_beyond_status(const cJSON *a, const cJSON *b)
{
	cJSON *ma = meta_sans_rv(a), *mb = meta_sans_rv(b);
	int same = cJSON_Compare(ma, mb, 1) &&
		   cJSON_Compare(cJSON_GetObjectItemCaseSensitive(a, "spec"), cJSON_GetObjectItemCaseSensitive(b, "spec"), 1);
	cJSON_Delete(ma);
	cJSON_Delete(mb);
	return !same;
}

int sbx_written_own_update(struct sbx_written *w, const cJSON *old_obj, const cJSON *new_obj)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(new_obj, "metadata");
	int own = sbx_written_arrived(w, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "uid")),
				      cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "resourceVersion")));
	return own && !sbx_changed_beyond_status(old_obj, new_obj);
}
