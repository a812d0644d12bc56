/* Our own writes that a cache has not shown yet, by object uid. A
 * reconcile on a cache that lags behind our status write (a pod event can
 * requeue the Sandbox before the watch brings our status back) would read the
 * pod again and write the same status a second time; while the write is in
 * flight the reconcile waits for it instead. The same for the pods we create:
 * a Sandbox whose status names a pod the pod cache has not shown yet waits
 * for the pod's event instead of reading it live. An entry goes when the
 * informer delivers that resourceVersion (any version, for pods), when the
 * object is deleted, or after WRITTEN_TTL_MS (swept every WRITTEN_SWEEP puts,
 * so entries whose event came before their put do not pile up). */
#ifndef SBX_RECONCILE_WRITTEN_H
#define SBX_RECONCILE_WRITTEN_H

#include <cjson/cJSON.h>

/* How long a reconcile that waits for its own write's event waits before it
 * looks again anyway. */
#define WRITTEN_RECHECK_MS 1000

struct sbx_written;

/* Returns a new empty tracker (caller frees with sbx_written_free). */
struct sbx_written *sbx_written_new(void);
/* Frees it; NULL is a no-op. */
void sbx_written_free(struct sbx_written *w);
/* Remembers that uid's object was written at resourceVersion rv (NULLs and
 * over-long values are ignored). */
void sbx_written_put(struct sbx_written *w, const char *uid, const char *rv);
/* The cache holds uid at resourceVersion rv (NULL: the object is gone):
 * forgets the entry once the cache shows our write (or it expired). Returns 1
 * when the cache still lags behind our last write. */
int sbx_written_lagging(struct sbx_written *w, const char *uid, const char *rv);
/* The cache now holds uid at resourceVersion rv. Returns 1 when that is
 * exactly our last write and no reconcile waited for it: the object says what
 * the reconcile that wrote it decided, so it needs no reconcile of its own
 * (what changes later, a pod or another writer, brings its own event).
 * Otherwise forgets the entry as sbx_written_lagging does and returns 0. */
int sbx_written_arrived(struct sbx_written *w, const char *uid, const char *rv);
/* The cache went from old to new: 1 when new is exactly our last write (as
 * sbx_written_arrived, which it calls) and differs from old in its status and
 * resourceVersion alone. A relist hands over one update for several writes:
 * another writer's change folded into ours is not ours. */
int sbx_written_own_update(struct sbx_written *w, const cJSON *old_obj, const cJSON *new_obj);
/* 1 when a and b differ in anything but their status and resourceVersion. */
int sbx_changed_beyond_status(const cJSON *a, const cJSON *b);

#endif
