/* SubjectAccessReview answers for a while (kube/access.h): a webhook that
 * asks "may this identity do X?" for every request asks the API server once
 * per identity and question per TTL, and concurrent askers of one question
 * share one review (the first asks, the others wait for its answer). The
 * key is a SHA-256 over the whole identity (username, uid, groups, extra, in
 * the order given) and every attribute, so two questions share an answer
 * only when they are the same question about the same identity. Errors are
 * never cached. An answer's TTL runs from when its question was sent (the
 * authorizer may have looked then), not from when the answer came: a review
 * can take KUBE_ACCESS_TIMEOUT_MS. Revocation therefore takes effect within
 * the allow TTL of the last question answered before it: an answer given
 * before a grant was removed stands no longer. A caller that waited for
 * another's review takes its answer even if the TTL ran out on the way.
 *
 * At most `max` answers are held: past it, the expired ones go, and if none
 * has expired the cache is emptied (a flood of identities costs reviews,
 * never memory). Thread-safe. */
#ifndef SBX_KUBE_ACCESSCACHE_H
#define SBX_KUBE_ACCESSCACHE_H

#include <stddef.h>

#include "kube/access.h"

/* The defaults: allowed answers 10 s, refusals 2 s, 4,096 answers. */
#define KUBE_ACCESSCACHE_ALLOW_MS 10000
#define KUBE_ACCESSCACHE_DENY_MS 2000
#define KUBE_ACCESSCACHE_MAX 4096

/* How a review was answered: from the cache, by waiting for another
 * caller's review of the same question, or by asking the API server. */
enum kube_access_source { KUBE_ACCESS_CACHED,
			  KUBE_ACCESS_SHARED,
			  KUBE_ACCESS_ASKED };

struct kube_accesscache;

/* Returns a new empty cache (caller frees with kube_accesscache_free);
 * allow_ms / deny_ms of 0 or less take the defaults, max 0 its default. */
struct kube_accesscache *kube_accesscache_new(long allow_ms, long deny_ms, size_t max);
/* Frees the cache; no thread may be inside a call on it. */
void kube_accesscache_free(struct kube_accesscache *ac);

/* kube_access_review through the cache ac: the same arguments and results
 * (reason may be NULL; a cached answer's reason is the one given when it was
 * asked, cut to 256 bytes). *source (NULL ok) says how it was answered. A
 * caller waiting on another's review waits at most KUBE_ACCESS_TIMEOUT_MS,
 * then asks itself. */
enum kube_err kube_access_review_cached(struct kube_accesscache *ac, struct kube_client *c, const cJSON *user_info,
					const struct kube_access_attrs *attrs, int *allowed, char *reason,
					size_t reasonlen, struct kube_error *err, enum kube_access_source *source);

#endif
