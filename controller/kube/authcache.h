/* What the API server answered about a bearer token, for a while: the
 * TokenReview and SubjectAccessReview behind a guarded endpoint
 * (kube/authfilter.h) are asked once per token, verb and path per TTL, as
 * controller-runtime's delegating filter caches them. Tokens are kept only
 * as their SHA-256. Errors are never cached. At most KUBE_AUTHCACHE_MAX
 * answers are held; a full cache is emptied (a flood of tokens costs reviews,
 * never memory). Thread-safe. */
#ifndef SBX_KUBE_AUTHCACHE_H
#define SBX_KUBE_AUTHCACHE_H

#include <stddef.h>

#define KUBE_AUTHCACHE_MAX 256
/* How long an answer holds: allowed, and refused (invalid token or not
 * allowed), in milliseconds. */
#define KUBE_AUTHCACHE_ALLOW_MS 60000
#define KUBE_AUTHCACHE_DENY_MS 10000

struct kube_authcache;

/* Returns a new empty cache (caller frees with kube_authcache_free). */
struct kube_authcache *kube_authcache_new(void);
void kube_authcache_free(struct kube_authcache *c);
/* The cached HTTP status (200, 401 or 403) for token, verb and path, with
 * the user name in user (size userlen); 0 when there is none or it expired. */
int kube_authcache_get(struct kube_authcache *c, const char *token, const char *verb, const char *path, char *user,
		       size_t userlen);
/* Remembers status (200, 401 or 403; anything else is ignored) and user
 * (NULL ok) for token, verb and path. */
void kube_authcache_put(struct kube_authcache *c, const char *token, const char *verb, const char *path, int status,
			const char *user);

#endif
