/* A thread-safe set of short strings: the scope digests being claimed in
 * this process (in-flight work is keyed by the digest, never by the raw key),
 * and the Sandbox uids whose binding was announced. Members are digests (32)
 * or uids (36), well inside the 64 bytes an entry holds (longer ones are
 * truncated). */
#ifndef SBX_RECONCILE_STRSET_H
#define SBX_RECONCILE_STRSET_H

struct sbx_strset;

/* Returns a new empty set (caller frees with sbx_strset_free). */
struct sbx_strset *sbx_strset_new(void);
/* Frees the set and its members; NULL is a no-op. */
void sbx_strset_free(struct sbx_strset *f);
/* Adds key; returns 1 when it was not there (the caller now owns it), 0 when
 * it already was. */
int sbx_strset_add(struct sbx_strset *f, const char *key);
/* Adds key (or renews it) for ttl_ms: it is a member until then. At 4,096
 * members and more, members whose time is up are swept every 1,024 adds. */
void sbx_strset_add_for(struct sbx_strset *f, const char *key, long ttl_ms);
/* Adds key for ttl_ms unless it is a member already (and its time, if any,
 * not up), in one step: returns 1 when added (the caller now owns it), 0
 * when it was there. Two threads that claim one key get 1 once. */
int sbx_strset_claim_for(struct sbx_strset *f, const char *key, long ttl_ms);
/* 1 when key is a member (and its time, if any, not up). */
int sbx_strset_has(struct sbx_strset *f, const char *key);
/* Removes key if present. */
void sbx_strset_del(struct sbx_strset *f, const char *key);

#endif
