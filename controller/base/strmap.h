/* A map from short strings to values of one fixed size, guarded by its own
 * lock: the one skeleton under the controller's sets and trackers (the
 * scope digests being claimed, our writes the caches have not shown yet,
 * a pool's creates in flight, resume start times). uthash inside.
 *
 * Every call but new, free, lock and unlock needs the lock held, so a
 * caller looks up, changes and removes an entry under one lock. A value is
 * zeroed when its entry is made and lives until the entry is removed. */
#ifndef SBX_BASE_STRMAP_H
#define SBX_BASE_STRMAP_H

#include <stddef.h>

/* Longest key held, in bytes (longer keys are refused: strmap_put). */
#define STRMAP_KEY_MAX 63

struct strmap;

/* Returns a new empty map of values of value_size bytes (caller frees with
 * strmap_free). */
struct strmap *strmap_new(size_t value_size);
/* Frees the map and every entry; NULL is a no-op. */
void strmap_free(struct strmap *m);
void strmap_lock(struct strmap *m);
void strmap_unlock(struct strmap *m);
/* The value of key (borrowed: valid until the entry is removed), or NULL
 * when it is absent. */
void *strmap_get(struct strmap *m, const char *key);
/* The value of key (borrowed: valid until the entry is removed), made
 * (zeroed, *created 1) when absent; NULL when key is longer than
 * STRMAP_KEY_MAX (nothing is made). created may be NULL. */
void *strmap_put(struct strmap *m, const char *key, int *created);
/* Removes key if present. */
void strmap_del(struct strmap *m, const char *key);
/* Removes every entry whose value drop(value, ctx) returns nonzero for. */
void strmap_sweep(struct strmap *m, int (*drop)(const void *value, void *ctx), void *ctx);
/* The number of entries. */
size_t strmap_count(struct strmap *m);

#endif
