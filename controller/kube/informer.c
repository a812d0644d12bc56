#include "kube/informer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>
#include <utlist.h>

#include "base/fault.h"
#include "base/xmalloc.h"
#include "base/zpack.h"
#include "base/ktime.h"
#include "kube/watch.h"
#include "obs/log.h"

#define MAX_WATCH_LINE ((size_t)4 << 20)
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 30000
#define WATCH_TIMEOUT_MIN_S 300 /* timeoutSeconds is drawn from [300, 600] */
#define WATCH_TIMEOUT_SPAN_S 300
/* Bookmarks arrive about once a minute; a watch silent for longer than this is
 * presumed dead (a half-open connection) and re-established. */
#define WATCH_LOW_SPEED_S 150
#define WATCH_HEALTHY_MS 1000 /* an accepted watch that lasted this long resets the backoff */
/* A cache that could not be brought up to date (no successful LIST, no watch
 * the API server accepted) for this long is no longer "synced": readiness
 * drops until a relist succeeds. */
#define STALE_AFTER_MS 60000

/* informer_set_stale_after_ms (tests): 0 means STALE_AFTER_MS. */
static atomic_int stale_after_override_ms;

static int64_t stale_after_ms(void)
{
	int ms = atomic_load(&stale_after_override_ms);
	return ms > 0 ? ms : STALE_AFTER_MS;
}

/* Objects are kept as their compact JSON text, deflated (base/zpack.h): a
 * trimmed object takes 4-5 KB as a cJSON tree, about 1 KB as text and 200-300
 * bytes deflated against the informer's dictionary; every reader gets a copy
 * anyway (inflating and parsing costs about what a deep copy did).
 *
 * The packed bytes never change once made (an update packs new ones) and are
 * reference-counted: a reader takes references under the store's lock and
 * inflates, parses and filters after releasing it, so a walk of a thousand
 * members holds the lock for a thousand increments, not a thousand parses. */
struct packed {
	atomic_uint refs;
	uint32_t zlen;	   /* bytes at z */
	uint32_t len;	   /* bytes of the text */
	unsigned char z[]; /* the trimmed object, printed unformatted, deflated */
};

struct entry {
	char *key;			   /* "ns/name", or "name" when cluster-scoped */
	struct packed *p;		   /* one reference is the entry's */
	char *idx;			   /* index label value, or NULL */
	struct entry *next;		   /* scratch list during a relist */
	struct entry *idx_prev, *idx_next; /* the members of its index bucket */
	UT_hash_handle hh;
};

/* The members of one index value, oldest first, as a doubly linked list: a
 * hash table per value would cost 600 bytes for the usual single member, and
 * a tenant may put many objects under one value, so removal must not scan. */
struct bucket {
	char *value;
	struct entry *members; /* by idx_prev / idx_next (utlist) */
	UT_hash_handle hh;
};

struct informer {
	struct kube_client *c;
	char *path;
	char *selector;
	char *field_selector;
	informer_trim_fn trim;
	char *index_label;
	struct zpack *zp; /* packs on the informer thread, unpacks anywhere */
	struct informer_handlers h;
	void *ctx;

	pthread_t thread;
	int started;
	atomic_int stop;

	pthread_mutex_t mu; /* guards store, index, count, synced */
	pthread_cond_t cv;  /* synced changes, stop requested */
	struct entry *store;
	struct bucket *index;
	size_t count;
	int synced;
	int delivered; /* the first LIST's objects all told to the handlers (informer_delivered) */

	/* informer thread only */
	char *rv;
	uint64_t rng;
	int64_t backoff_ms;
	int relist;
	int64_t current_ms;  /* when the cache was last known current */
	struct entry *fresh; /* the list being collected */
};

/* ---- the store (caller holds mu) ---- */

static void index_add(struct informer *inf, struct entry *e)
{
	if (!e->idx)
		return;
	struct bucket *b;
	HASH_FIND_STR(inf->index, e->idx, b);
	if (!b) {
		b = xcalloc(1, sizeof *b);
		b->value = xstrdup(e->idx);
		HASH_ADD_KEYPTR(hh, inf->index, b->value, strlen(b->value), b);
	}
	DL_APPEND2(b->members, e, idx_prev, idx_next);
}

static void index_del(struct informer *inf, struct entry *e)
{
	if (!e->idx)
		return;
	struct bucket *b;
	HASH_FIND_STR(inf->index, e->idx, b);
	if (!b)
		return;
	DL_DELETE2(b->members, e, idx_prev, idx_next);
	if (!b->members) {
		HASH_DEL(inf->index, b);
		free(b->value);
		free(b);
	}
}

/* Removes and returns the entry for key, or NULL. */
static struct entry *store_take(struct informer *inf, const char *key)
{
	struct entry *e;
	HASH_FIND_STR(inf->store, key, e);
	if (!e)
		return NULL;
	HASH_DEL(inf->store, e);
	index_del(inf, e);
	inf->count--;
	return e;
}

/* Inserts e (whose key must not be present). */
static void store_put(struct informer *inf, struct entry *e)
{
	HASH_ADD_KEYPTR(hh, inf->store, e->key, strlen(e->key), e);
	index_add(inf, e);
	inf->count++;
}

/* Takes a reference to p (caller holds the store's lock, or owns p). */
static struct packed *packed_get(struct packed *p)
{
	atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
	return p;
}

/* Drops a reference to p (NULL ok); the last one frees it. */
static void packed_put(struct packed *p)
{
	if (p && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
		free(p);
}

static void entry_free(struct entry *e)
{
	if (!e)
		return;
	free(e->key);
	free(e->idx);
	packed_put(e->p);
	free(e);
}

/* Parses text, which cJSON printed (caller frees the tree); aborts when out
 * of memory, the only way it can fail. */
static cJSON *parse_printed(const char *text)
{
	cJSON *o = text ? cJSON_Parse(text) : NULL;
	if (!o)
		abort();
	return o;
}

/* A new tree of the object packed in p (caller frees): see parse_printed. */
static cJSON *unpack_obj(const struct informer *inf, const struct packed *p)
{
	char *text = zpack_unpack(inf->zp, p->z, p->zlen, p->len);
	cJSON *o = parse_printed(text);
	free(text);
	return o;
}

static cJSON *entry_obj(const struct informer *inf, const struct entry *e)
{
	return unpack_obj(inf, e->p);
}

/* ---- objects ---- */

/* A copy without metadata.managedFields, and without kind/apiVersion: watch
 * events carry them and LIST items do not, and the cache should hold the same
 * shape whichever way an object arrived. */
static cJSON *default_trim(const cJSON *obj)
{
	cJSON *c = cJSON_Duplicate(obj, 1);
	if (!c)
		abort(); /* cJSON_Duplicate fails only when out of memory */
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "metadata"),
						"managedFields");
	cJSON_DeleteItemFromObjectCaseSensitive(c, "kind");
	cJSON_DeleteItemFromObjectCaseSensitive(c, "apiVersion");
	return c;
}

static const char *md_str(const cJSON *obj, const char *field)
{
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(md, field);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static char *make_key(const char *ns, const char *name)
{
	return ns && *ns ? xasprintf("%s/%s", ns, name) : xstrdup(name);
}

/* Builds a store entry from an API object (trimmed copy), or NULL if the
 * object has no name. With tree non-NULL, *tree gets a tree of the trimmed
 * copy as entry_obj would give it (caller frees), parsed from the text before
 * it is packed rather than unpacked from the entry again. */
static struct entry *entry_from(struct informer *inf, const cJSON *obj, cJSON **tree)
{
	const char *name = md_str(obj, "name");
	if (!name)
		return NULL;
	struct entry *e = xcalloc(1, sizeof *e);
	e->key = make_key(md_str(obj, "namespace"), name);
	cJSON *t = inf->trim ? inf->trim(obj) : NULL;
	if (!t)
		t = default_trim(obj);
	if (inf->index_label) {
		/* The trimmed copy's label: a trimmer may index by what it derives. */
		const cJSON *labels = cJSON_GetObjectItemCaseSensitive(
		    cJSON_GetObjectItemCaseSensitive(t, "metadata"), "labels");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(labels, inf->index_label);
		if (cJSON_IsString(v))
			e->idx = xstrdup(v->valuestring);
	}
	char *text = cJSON_PrintUnformatted(t);
	cJSON_Delete(t);
	if (!text)
		abort(); /* out of memory */
	size_t len = strlen(text), zlen;
	if (len > UINT32_MAX)
		abort(); /* a response body is capped far below (kube/client.h) */
	unsigned char *z = zpack_pack(inf->zp, text, len, &zlen);
	e->p = xmalloc(sizeof *e->p + (zlen ? zlen : 1));
	atomic_init(&e->p->refs, 1);
	e->p->len = (uint32_t)len;
	e->p->zlen = (uint32_t)zlen;
	memcpy(e->p->z, z, zlen);
	free(z);
	if (tree)
		*tree = parse_printed(text);
	free(text);
	return e;
}

static void set_rv(struct informer *inf, const cJSON *obj)
{
	const char *rv = md_str(obj, "resourceVersion");
	if (rv && *rv) {
		free(inf->rv);
		inf->rv = xstrdup(rv);
	}
}

/* ---- timing ---- */

static uint64_t rnd(struct informer *inf)
{
	/* xorshift64*: jitter only, not security. */
	inf->rng ^= inf->rng >> 12;
	inf->rng ^= inf->rng << 25;
	inf->rng ^= inf->rng >> 27;
	return inf->rng * 2685821657736338717ull;
}

/* Sleeps until deadline (ktime_mono_ms), returning early (1) when stop is
 * requested. */
static int pause_until(struct informer *inf, int64_t deadline)
{
	pthread_mutex_lock(&inf->mu);
	while (!atomic_load(&inf->stop)) {
		if (ktime_cond_wait_until(&inf->cv, &inf->mu, deadline) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&inf->mu);
	return atomic_load(&inf->stop);
}

static void unsync(struct informer *inf, const char *why);

/* Waits out the current backoff (with jitter: between half and all of it, or
 * at least retry_after_s) and doubles it. Returns 1 if stop was requested.
 *
 * Retry-After is honoured only up to BACKOFF_MAX_MS: a proxy may ask for up to
 * a day (kube/errors.c), and a reconnect that late leaves the cache frozen
 * that long. Nor does a cache that still counts as synced sleep past its stale
 * deadline: the pause wakes then to unsync it (and mark a relist), and waits
 * out the rest, so readiness drops on time rather than after the pause. */
static int back_off(struct informer *inf, int retry_after_s)
{
	int64_t b = inf->backoff_ms;
	int64_t d = b / 2 + (int64_t)(rnd(inf) % (uint64_t)(b / 2 + 1));
	int64_t ra = retry_after_s > 0 ? (int64_t)retry_after_s * 1000 : 0;
	if (ra > BACKOFF_MAX_MS)
		ra = BACKOFF_MAX_MS;
	if (d < ra)
		d = ra;
	inf->backoff_ms = b * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : b * 2;
	int64_t end = ktime_mono_ms() + d;
	/* synced is set only on this thread, so reading it once is enough. */
	pthread_mutex_lock(&inf->mu);
	int synced = inf->synced;
	pthread_mutex_unlock(&inf->mu);
	int64_t stale_at = inf->current_ms + stale_after_ms();
	if (synced && stale_at < end) {
		if (pause_until(inf, stale_at))
			return 1;
		/* Events may have been missed for too long: only a relist makes
		 * the cache trustworthy again. */
		unsync(inf, "watch cannot be re-established");
		inf->relist = 1;
	}
	return pause_until(inf, end);
}

/* ---- list ---- */

static void fresh_clear(struct informer *inf)
{
	struct entry *e, *t;
	HASH_ITER(hh, inf->fresh, e, t)
	{
		HASH_DEL(inf->fresh, e);
		entry_free(e);
	}
}

static void on_list_reset(void *u)
{
	fresh_clear(u);
}

static void on_list_item(void *u, const cJSON *item)
{
	struct informer *inf = u;
	struct entry *e = entry_from(inf, item, NULL), *old;
	if (!e)
		return;
	HASH_FIND_STR(inf->fresh, e->key, old);
	if (old) {
		HASH_DEL(inf->fresh, old);
		entry_free(old);
	}
	HASH_ADD_KEYPTR(hh, inf->fresh, e->key, strlen(e->key), e);
}

/* One difference a relist found. The handlers get a tree of each object in
 * turn, parsed as they are called: trees of a whole cache at once would make
 * a restart's peak memory many times the cache's. */
struct change {
	struct entry *old;	 /* owned here; NULL for an add */
	const struct entry *now; /* in the store; only this thread changes it */
};

/* The test-only delay "<what>:<resource>" (base/fault.h) of this cache. */
static void lag(const struct informer *inf, const char *what)
{
	char point[96];
	const char *last = strrchr(inf->path, '/');
	snprintf(point, sizeof point, "%s:%s", what, last ? last + 1 : inf->path);
	fault_delay(point);
}

/* The uid of o, or NULL. */
static const char *uid_of(const cJSON *o)
{
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "uid");
	return cJSON_IsString(u) ? u->valuestring : NULL;
}

/* Tells the handlers that now took old's place under its key (old NULL: an
 * addition). Another uid under the same key (deleted and made again while
 * no watch was open: a relist sees only the new one) is the one's deletion
 * and the other's addition, as the two watch events would have said:
 * handlers that count objects by uid lose none and keep none twice. */
static void deliver(struct informer *inf, const cJSON *old, const cJSON *now)
{
	const char *ou = old ? uid_of(old) : NULL, *nu = uid_of(now);
	if (ou && nu && strcmp(ou, nu)) {
		if (inf->h.on_delete)
			inf->h.on_delete(inf->ctx, old);
		old = NULL;
	}
	if (old) {
		if (inf->h.on_update)
			inf->h.on_update(inf->ctx, old, now);
	} else if (inf->h.on_add) {
		inf->h.on_add(inf->ctx, now);
	}
}

/* LISTs and replaces the store, delivering the differences. Returns 0 or -1
 * (with the error logged and *retry_after set). */
static int relist(struct informer *inf, int *retry_after)
{
	struct kube_error err;
	char *rv = NULL;
	struct kube_request_opts ro = { .abort = &inf->stop, .field_selector = inf->field_selector };
	lag(inf, "list"); /* tests: this cache fills late */
	enum kube_err r = kube_list_ex(inf->c, inf->path, inf->selector, on_list_item,
				       on_list_reset, inf, &ro, &rv, &err);
	if (r != KUBE_OK) {
		fresh_clear(inf);
		if (!atomic_load(&inf->stop))
			log_kv(LOG_WARN, "informer list failed", "path", inf->path, "error",
			       kube_err_str(r), "message", err.message);
		*retry_after = err.retry_after_s;
		return -1;
	}
	free(inf->rv);
	inf->rv = rv;
	inf->current_ms = ktime_mono_ms();

	struct entry *gone = NULL, *e, *t;
	size_t nfresh = HASH_COUNT(inf->fresh), nch = 0;
	struct change *ch = xcalloc(nfresh ? nfresh : 1, sizeof *ch);
	pthread_mutex_lock(&inf->mu);
	HASH_ITER(hh, inf->store, e, t)
	{
		struct entry *f;
		HASH_FIND_STR(inf->fresh, e->key, f);
		if (!f) {
			store_take(inf, e->key);
			e->next = gone;
			gone = e;
		}
	}
	HASH_ITER(hh, inf->fresh, e, t)
	{
		HASH_DEL(inf->fresh, e);
		ch[nch].old = store_take(inf, e->key);
		ch[nch++].now = e;
		store_put(inf, e);
	}
	int was_synced = inf->synced;
	inf->synced = 1;
	pthread_cond_broadcast(&inf->cv);
	pthread_mutex_unlock(&inf->mu);
	if (!was_synced)
		log_kv(LOG_INFO, "informer synced", "path", inf->path, "resourceVersion", inf->rv);

	while (gone) {
		e = gone;
		gone = e->next;
		if (inf->h.on_delete) {
			cJSON *o = entry_obj(inf, e);
			inf->h.on_delete(inf->ctx, o);
			cJSON_Delete(o);
		}
		entry_free(e);
	}
	for (size_t i = 0; i < nch; i++) {
		if (inf->h.on_add || inf->h.on_update || inf->h.on_delete) {
			cJSON *o = ch[i].old ? entry_obj(inf, ch[i].old) : NULL, *now = entry_obj(inf, ch[i].now);
			deliver(inf, o, now);
			cJSON_Delete(o);
			cJSON_Delete(now);
		}
		entry_free(ch[i].old);
	}
	free(ch);
	if (!was_synced) {
		pthread_mutex_lock(&inf->mu);
		inf->delivered = 1;
		pthread_mutex_unlock(&inf->mu);
	}
	return 0;
}

/* ---- watch ---- */

struct watch_state {
	struct informer *inf;
	struct watch_parser *parser;
	int parse_failed;
	int events;
	char msg[256];
};

/* Applies one watch event to the store and tells the handlers. Returns
 * non-zero to end the stream (ERROR events). */
static int on_event(void *u, enum watch_event_type t, const cJSON *obj)
{
	struct watch_state *ws = u;
	struct informer *inf = ws->inf;
	ws->events++;
	if (t == WATCH_BOOKMARK) {
		set_rv(inf, obj);
		return 0;
	}
	if (t == WATCH_ERROR) {
		struct kube_error e;
		kube_error_from_status(obj, &e);
		char code[16];
		snprintf(code, sizeof code, "%ld", e.http_status);
		log_kv(e.code == KUBE_ERR_GONE ? LOG_INFO : LOG_WARN,
		       "informer watch error event, relisting", "path", inf->path, "code", code,
		       "reason", e.reason, "message", e.message);
		inf->relist = 1;
		return 1;
	}
	lag(inf, "watch"); /* tests: this cache lags behind the others */
	if (t == WATCH_DELETED)
		lag(inf, "watch-delete"); /* ... or only behind the deletions */
	else if (t == WATCH_ADDED)
		lag(inf, "watch-add"); /* ... or the additions */
	cJSON *now = NULL;
	struct entry *e = entry_from(inf, obj, &now);
	if (!e)
		return 0;
	set_rv(inf, obj);
	pthread_mutex_lock(&inf->mu);
	struct entry *old = store_take(inf, e->key);
	if (t == WATCH_DELETED) {
		pthread_mutex_unlock(&inf->mu);
		lag(inf, "gone"); /* tests: a deletion in the cache before its handler hears of it */
		if (inf->h.on_delete)
			inf->h.on_delete(inf->ctx, now);
		cJSON_Delete(now);
		entry_free(e);
		entry_free(old);
		return 0;
	}
	store_put(inf, e);
	pthread_mutex_unlock(&inf->mu);
	cJSON *o = old && (inf->h.on_update || inf->h.on_delete) ? entry_obj(inf, old) : NULL;
	if (!old || o)
		deliver(inf, o, now);
	cJSON_Delete(o);
	cJSON_Delete(now);
	entry_free(old);
	return 0;
}

static int on_data(void *u, const char *data, size_t n)
{
	struct watch_state *ws = u;
	int rc = watch_parser_feed(ws->parser, data, n, on_event, ws, ws->msg, sizeof ws->msg);
	if (rc < 0)
		ws->parse_failed = 1;
	return rc != 0;
}

/* Runs one watch until it ends. Returns 0 when it ended normally (server
 * timeout) having been healthy, or -1 when the caller should back off; sets
 * inf->relist when the cache must be re-listed. */
static int watch_once(struct informer *inf, int *retry_after)
{
	char timeout[16];
	long tmo = WATCH_TIMEOUT_MIN_S + (long)(rnd(inf) % (WATCH_TIMEOUT_SPAN_S + 1));
	snprintf(timeout, sizeof timeout, "%ld", tmo);
	const char *q[] = { "watch",
			    "true",
			    "allowWatchBookmarks",
			    "true",
			    "timeoutSeconds",
			    timeout,
			    "resourceVersion",
			    inf->rv,
			    "labelSelector",
			    inf->selector,
			    "fieldSelector",
			    inf->field_selector,
			    NULL };
	struct watch_state ws = { .inf = inf, .parser = watch_parser_new(MAX_WATCH_LINE) };
	struct kube_stream_opts so = { .low_speed_time_s = WATCH_LOW_SPEED_S,
				       .max_time_ms = (tmo + 60) * 1000,
				       .stop = &inf->stop };
	struct kube_error err;
	int64_t t0 = ktime_mono_ms();
	enum kube_err r = kube_stream(inf->c, inf->path, q, &so, on_data, &ws, &err);
	int64_t lasted = ktime_mono_ms() - t0;
	watch_parser_free(ws.parser);
	*retry_after = 0;
	if (atomic_load(&inf->stop))
		return 0;
	if (ws.parse_failed) {
		log_kv(LOG_WARN, "informer watch stream unusable, relisting", "path", inf->path,
		       "error", ws.msg);
		inf->relist = 1;
		return -1;
	}
	/* Only a watch the API server accepted (a 2xx answer; any event implies
	 * one) kept the cache current. An attempt that got no answer or an
	 * error proves nothing however long it took (a 5 s connect timeout, a
	 * 503 after a slow proxy, a server that accepts and never answers): the
	 * stale clock keeps running, or readiness would never drop. */
	int accepted = (err.http_status >= 200 && err.http_status < 300) || ws.events > 0;
	if (accepted)
		inf->current_ms = ktime_mono_ms(); /* it kept the cache current until now */
	/* A healthy watch ends (server timeout) and is simply resumed; one that
	 * fails, or is accepted and ends at once, backs off, so a server that
	 * keeps refusing (or hanging up) cannot make us relist in a tight loop. */
	int healthy = accepted && (lasted >= WATCH_HEALTHY_MS || ws.events > 1);
	if (inf->relist)
		return healthy ? 0 : -1; /* an ERROR event (usually 410 Expired) */
	if (r == KUBE_ERR_GONE) {
		log_kv(LOG_INFO, "informer resourceVersion expired, relisting", "path", inf->path);
		inf->relist = 1;
		return healthy ? 0 : -1;
	}
	if (r != KUBE_OK) {
		log_kv(LOG_WARN, "informer watch failed", "path", inf->path, "error",
		       kube_err_str(r), "message", err.message);
		*retry_after = err.retry_after_s;
		/* It served for a while: this break starts a fresh backoff. */
		if (healthy)
			inf->backoff_ms = BACKOFF_MIN_MS;
		return -1;
	}
	return healthy || ws.events > 0 ? 0 : -1;
}

/* The cache can no longer be kept current: readiness drops (informer_wait_synced
 * answers 0) until a relist succeeds. */
static void unsync(struct informer *inf, const char *why)
{
	pthread_mutex_lock(&inf->mu);
	int was = inf->synced;
	inf->synced = 0;
	pthread_mutex_unlock(&inf->mu);
	if (was && !atomic_load(&inf->stop))
		log_kv(LOG_WARN, "informer cache not current, not ready until a relist succeeds", "path",
		       inf->path, "reason", why);
}

static void *informer_main(void *u)
{
	struct informer *inf = u;
	inf->relist = 1;
	while (!atomic_load(&inf->stop)) {
		int ra = 0;
		if (inf->relist) {
			if (relist(inf, &ra) < 0) {
				unsync(inf, "relist failed");
				back_off(inf, ra);
				continue;
			}
			inf->relist = 0;
		}
		if (watch_once(inf, &ra) < 0) {
			if (ktime_mono_ms() - inf->current_ms > stale_after_ms()) {
				/* Events may have been missed for a minute: only a
				 * relist makes the cache trustworthy again. */
				unsync(inf, "watch cannot be re-established");
				inf->relist = 1;
			}
			back_off(inf, ra);
			continue;
		}
		inf->current_ms = ktime_mono_ms();
		inf->backoff_ms = BACKOFF_MIN_MS;
	}
	return NULL;
}

/* ---- public ---- */

struct informer *informer_new(struct kube_client *c, const char *path, const char *label_selector,
			      informer_trim_fn trim, const char *index_label,
			      const struct informer_handlers *h, void *ctx)
{
	struct informer *inf = xcalloc(1, sizeof *inf);
	inf->c = c;
	inf->path = xstrdup(path);
	inf->selector = label_selector && *label_selector ? xstrdup(label_selector) : NULL;
	inf->trim = trim;
	inf->index_label = xstrdup(index_label);
	inf->zp = zpack_new(NULL, 0);
	if (h)
		inf->h = *h;
	inf->ctx = ctx;
	atomic_init(&inf->stop, 0);
	pthread_mutex_init(&inf->mu, NULL);
	ktime_cond_init(&inf->cv);
	inf->backoff_ms = BACKOFF_MIN_MS;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	inf->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)inf;
	if (!inf->rng)
		inf->rng = 88172645463325252ull;
	return inf;
}

int informer_set_dictionary(struct informer *inf, const char *dict)
{
	if (inf->started)
		return -1;
	zpack_free(inf->zp);
	inf->zp = zpack_new(dict, dict ? strlen(dict) : 0);
	return 0;
}

int informer_set_field_selector(struct informer *inf, const char *selector)
{
	if (inf->started)
		return -1;
	free(inf->field_selector);
	inf->field_selector = selector && *selector ? xstrdup(selector) : NULL;
	return 0;
}

int informer_start(struct informer *inf)
{
	if (inf->started)
		return -1;
	if (pthread_create(&inf->thread, NULL, informer_main, inf) != 0)
		return -1;
	inf->started = 1;
	return 0;
}

int informer_wait_synced(struct informer *inf, long timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? -1 : ktime_mono_ms() + timeout_ms;
	pthread_mutex_lock(&inf->mu);
	while (!inf->synced && !atomic_load(&inf->stop)) {
		if (ktime_cond_wait_until(&inf->cv, &inf->mu, deadline) == ETIMEDOUT)
			break;
	}
	int s = inf->synced;
	pthread_mutex_unlock(&inf->mu);
	return s;
}

int informer_delivered(struct informer *inf)
{
	pthread_mutex_lock(&inf->mu);
	int d = inf->delivered;
	pthread_mutex_unlock(&inf->mu);
	return d;
}

cJSON *informer_get(struct informer *inf, const char *ns, const char *name)
{
	char *key = make_key(ns, name);
	struct packed *p = NULL; /* unpacked and parsed outside the lock */
	pthread_mutex_lock(&inf->mu);
	struct entry *e;
	HASH_FIND_STR(inf->store, key, e);
	if (e)
		p = packed_get(e->p);
	pthread_mutex_unlock(&inf->mu);
	free(key);
	cJSON *o = p ? unpack_obj(inf, p) : NULL;
	packed_put(p);
	return o;
}

cJSON *informer_list_by_index(struct informer *inf, const char *value)
{
	return informer_list_by_index_from(inf, value, 0, SIZE_MAX, NULL, NULL);
}

/* The members of an index value (value NULL: the whole store), from member
 * start (modulo their count) on, wrapping around once, as references taken
 * under the lock (caller drops each with packed_put and frees the array);
 * *n gets their number. Only pointers are copied under the lock. */
static struct packed **refs_of(struct informer *inf, const char *value, int whole, size_t start, size_t *n)
{
	pthread_mutex_lock(&inf->mu);
	struct bucket *b = NULL;
	if (!whole && value)
		HASH_FIND_STR(inf->index, value, b);
	size_t count = 0;
	if (whole)
		count = inf->count;
	else
		for (struct entry *e = b ? b->members : NULL; e; e = e->idx_next)
			count++;
	struct packed **refs = xmalloc((count ? count : 1) * sizeof *refs);
	size_t i = 0;
	if (whole) {
		for (struct entry *e = inf->store; e && i < count; e = e->hh.next)
			refs[i++] = packed_get(e->p);
	} else if (count) {
		struct entry *e = b->members;
		for (size_t k = 0; k < start % count; k++)
			e = e->idx_next;
		for (; i < count; i++, e = e->idx_next ? e->idx_next : b->members)
			refs[i] = packed_get(e->p);
	}
	pthread_mutex_unlock(&inf->mu);
	*n = i;
	return refs;
}

cJSON *informer_list_by_index_from(struct informer *inf, const char *value, size_t start, size_t max,
				   int (*keep)(const cJSON *obj, void *ctx), void *ctx)
{
	cJSON *arr = cJSON_CreateArray();
	if (!arr)
		abort();
	size_t n, got = 0;
	struct packed **refs = refs_of(inf, value, 0, start, &n);
	for (size_t i = 0; i < n; i++) {
		if (got < max) {
			cJSON *o = unpack_obj(inf, refs[i]);
			if (keep && !keep(o, ctx)) {
				cJSON_Delete(o);
			} else {
				if (!cJSON_AddItemToArray(arr, o))
					abort();
				got++;
			}
		}
		packed_put(refs[i]);
	}
	free(refs);
	return arr;
}

cJSON *informer_list(struct informer *inf)
{
	cJSON *arr = cJSON_CreateArray();
	if (!arr)
		abort();
	size_t n;
	struct packed **refs = refs_of(inf, NULL, 1, 0, &n);
	for (size_t i = 0; i < n; i++) {
		if (!cJSON_AddItemToArray(arr, unpack_obj(inf, refs[i])))
			abort();
		packed_put(refs[i]);
	}
	free(refs);
	return arr;
}

size_t informer_size(struct informer *inf)
{
	pthread_mutex_lock(&inf->mu);
	size_t n = inf->count;
	pthread_mutex_unlock(&inf->mu);
	return n;
}

void informer_set_stale_after_ms(int ms)
{
	atomic_store(&stale_after_override_ms, ms > 0 ? ms : 0);
}

void informer_request_stop(struct informer *inf)
{
	atomic_store(&inf->stop, 1);
	pthread_mutex_lock(&inf->mu);
	pthread_cond_broadcast(&inf->cv);
	pthread_mutex_unlock(&inf->mu);
}

void informer_stop(struct informer *inf)
{
	informer_request_stop(inf);
	if (inf->started) {
		pthread_join(inf->thread, NULL);
		inf->started = 0;
	}
}

void informer_free(struct informer *inf)
{
	if (!inf)
		return;
	informer_stop(inf);
	struct entry *e, *t;
	HASH_ITER(hh, inf->store, e, t)
	{
		store_take(inf, e->key);
		entry_free(e);
	}
	fresh_clear(inf);
	zpack_free(inf->zp);
	free(inf->rv);
	free(inf->path);
	free(inf->selector);
	free(inf->field_selector);
	free(inf->index_label);
	pthread_cond_destroy(&inf->cv);
	pthread_mutex_destroy(&inf->mu);
	free(inf);
}
