/* An informer (client-go's reflector + indexer): LIST a collection, then WATCH
 * it from the list's resourceVersion, keeping a local cache of (trimmed)
 * objects and telling handlers what changed. Watches carry bookmarks and a
 * randomised server timeout; an expired resourceVersion (410 / ERROR event) or a
 * broken stream leads to a relist whose differences are delivered as adds,
 * updates and deletes; reconnects back off exponentially with jitter (at
 * least any Retry-After the API answered, but never more than 30 s). */
#ifndef SBX_KUBE_INFORMER_H
#define SBX_KUBE_INFORMER_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "kube/client.h"

/* Returns a new trimmed copy of obj to store (only the fields the controller
 * reads). Must not return NULL. */
typedef cJSON *(*informer_trim_fn)(const cJSON *obj);

/* Objects are borrowed for the call. Handlers run on the informer thread,
 * without the store lock held (so they may call informer_get). After a relist,
 * on_update is called for every object still present (a resync); one of
 * another uid under the same name (made again while no watch was open) is
 * the old one's on_delete and the new one's on_add. Any handler may be
 * NULL. */
struct informer_handlers {
	void (*on_add)(void *ctx, const cJSON *obj);
	void (*on_update)(void *ctx, const cJSON *old_obj, const cJSON *new_obj);
	void (*on_delete)(void *ctx, const cJSON *obj);
};

struct informer;

/* Returns a new informer for path (a collection, e.g. "/api/v1/pods" for all
 * namespaces), optionally filtered by label_selector. trim NULL stores a copy
 * minus metadata.managedFields. index_label (NULL ok) is a label key whose
 * value (in the trimmed copy: a trimmer may set it) indexes the cache for
 * informer_list_by_index. The client is borrowed
 * and must outlive the informer. Strings are copied. */
struct informer *informer_new(struct kube_client *c, const char *path, const char *label_selector,
			      informer_trim_fn trim, const char *index_label,
			      const struct informer_handlers *h, void *ctx);
/* Sets the preset dictionary (copied) the cache deflates its objects against:
 * the keys and values most objects share, most frequent last (base/zpack.h).
 * Only before informer_start; returns 0, or -1 once started. */
int informer_set_dictionary(struct informer *inf, const char *dict);
/* Narrows the LIST and WATCH with a fieldSelector (copied), e.g.
 * "metadata.name=x" for one object that RBAC grants by resourceNames. Only
 * before informer_start; returns 0, or -1 once started. */
int informer_set_field_selector(struct informer *inf, const char *selector);
/* Starts the informer thread. Returns 0, or -1 if it cannot be started (or
 * already was). */
int informer_start(struct informer *inf);
/* Returns 1 while the cache is current: after a successful LIST, until a
 * relist fails or no watch was accepted (a 2xx answer) for a minute, however
 * long the failed attempts took (then 0 until the next successful relist).
 * Waits up to timeout_ms for it (< 0 waits forever, 0 only looks). */
int informer_wait_synced(struct informer *inf, long timeout_ms);
/* Returns 1 once the handlers have been told of every object of the first
 * successful LIST (informer_wait_synced turns 1 just before they are): a
 * consumer that acts on what the handlers told it, not on the store, waits
 * for this rather than for the sync. Only looks. */
int informer_delivered(struct informer *inf);
/* Returns a deep copy of the cached object (caller frees), or NULL. ns NULL or
 * "" for cluster-scoped objects. */
cJSON *informer_get(struct informer *inf, const char *ns, const char *name);
/* Returns a new array (caller frees, possibly empty) of deep copies of the
 * cached objects whose index label has this value. */
cJSON *informer_list_by_index(struct informer *inf, const char *value);
/* Like informer_list_by_index, but only the first max objects that keep(obj,
 * ctx) accepts (keep NULL: any), looked at from the index's member number
 * start (modulo their count) on, wrapping around once: a caller that wants a
 * few of many copies only those it looks at, and a random start spreads such
 * callers apart. The cache's lock is held only to take references to the
 * members' packed bytes, never while they are inflated, parsed or kept, so
 * keep may take its time and call into this informer. Returns a new array of
 * copies (caller frees). */
cJSON *informer_list_by_index_from(struct informer *inf, const char *value, size_t start, size_t max,
				   int (*keep)(const cJSON *obj, void *ctx), void *ctx);
/* Returns a new array of deep copies of every cached object (caller frees). */
cJSON *informer_list(struct informer *inf);
/* Number of cached objects. */
size_t informer_size(struct informer *inf);
/* Asks the thread to stop and returns at once: a blocked watch or list is
 * aborted within about a second (libcurl's progress callback on an idle
 * stream). Asking every informer first and then informer_stop on each waits
 * that second once, not once per informer. */
void informer_request_stop(struct informer *inf);
/* Stops the thread and joins it; a blocked watch or list is aborted within
 * about a second. Safe to call more than once, or before start. */
void informer_stop(struct informer *inf);
/* Stops (if needed) and frees the informer and its cache. */
void informer_free(struct informer *inf);
/* For tests: sets how long (ms) every informer's cache may go without a
 * successful LIST or an accepted watch before it stops counting as synced
 * (default a minute); ms <= 0 restores the default. The controller never
 * calls it. */
void informer_set_stale_after_ms(int ms);

#endif
