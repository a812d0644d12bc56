#include "kube/accesscache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <uthash.h>

#include "base/ktime.h"
#include "base/xmalloc.h"

#define KEY_HEX 65

struct answer {
	char key[KEY_HEX];
	int pending; /* a caller is asking the API server now */
	int allowed;
	char reason[256];
	int64_t expires_ms; /* its TTL from when the question was sent */
	UT_hash_handle hh;
};

struct kube_accesscache {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* a pending review ended */
	struct answer *map;
	long allow_ms, deny_ms;
	size_t max;
};

struct kube_accesscache *kube_accesscache_new(long allow_ms, long deny_ms, size_t max)
{
	struct kube_accesscache *ac = xcalloc(1, sizeof *ac);
	pthread_mutex_init(&ac->mu, NULL);
	ktime_cond_init(&ac->cv);
	ac->allow_ms = allow_ms > 0 ? allow_ms : KUBE_ACCESSCACHE_ALLOW_MS;
	ac->deny_ms = deny_ms > 0 ? deny_ms : KUBE_ACCESSCACHE_DENY_MS;
	ac->max = max ? max : KUBE_ACCESSCACHE_MAX;
	return ac;
}

static void drop(struct kube_accesscache *ac, struct answer *a)
{
	HASH_DEL(ac->map, a);
	free(a);
}

void kube_accesscache_free(struct kube_accesscache *ac)
{
	if (!ac)
		return;
	struct answer *a, *t;
	HASH_ITER(hh, ac->map, a, t)
	drop(ac, a);
	pthread_cond_destroy(&ac->cv);
	pthread_mutex_destroy(&ac->mu);
	free(ac);
}

/* Feeds s (NULL: absent, unlike "") with its length into the digest. */
static int feed(EVP_MD_CTX *md, const char *s)
{
	unsigned char lp[5] = { 0 };
	size_t n = s ? strlen(s) : 0;
	lp[0] = s ? 1 : 0;
	lp[1] = (unsigned char)(n >> 24);
	lp[2] = (unsigned char)(n >> 16);
	lp[3] = (unsigned char)(n >> 8);
	lp[4] = (unsigned char)n;
	return EVP_DigestUpdate(md, lp, sizeof lp) == 1 && (!n || EVP_DigestUpdate(md, s, n) == 1) ? 0 : -1;
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The key of the question into out: SHA-256 hex of every field that makes
 * the question, each length-prefixed. 0, or -1 (then it is not cached). */
static int make_key(const cJSON *user_info, const struct kube_access_attrs *a, char out[KEY_HEX])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char d[32];
	unsigned int dl = 0;
	int rc = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 ? 0 : -1;
	rc |= feed(md, "kube/access/v1") | feed(md, str(user_info, "username")) | feed(md, str(user_info, "uid"));
	const cJSON *g, *kv, *v;
	cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(user_info, "groups"))
	{
		rc |= feed(md, "g") | feed(md, cJSON_IsString(g) ? g->valuestring : NULL);
	}
	cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(user_info, "extra"))
	{
		rc |= feed(md, "x") | feed(md, kv->string);
		cJSON_ArrayForEach(v, kv)
		{
			rc |= feed(md, "v") | feed(md, cJSON_IsString(v) ? v->valuestring : NULL);
		}
	}
	rc |= feed(md, "attrs") | feed(md, a->ns) | feed(md, a->verb) | feed(md, a->group) | feed(md, a->resource) |
	      feed(md, a->subresource) | feed(md, a->name) | feed(md, a->path);
	if (rc == 0 && (EVP_DigestFinal_ex(md, d, &dl) != 1 || dl != sizeof d))
		rc = -1;
	EVP_MD_CTX_free(md);
	if (rc < 0)
		return -1;
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = hx[d[i] >> 4];
		out[2 * i + 1] = hx[d[i] & 15];
	}
	out[64] = '\0';
	return 0;
}

/* Makes room for one more answer (caller holds mu): the expired ones go;
 * if none has, every settled one does. Pending ones stay (their askers
 * will fill them). */
static void make_room(struct kube_accesscache *ac, int64_t now)
{
	if (HASH_COUNT(ac->map) < ac->max)
		return;
	struct answer *a, *t;
	HASH_ITER(hh, ac->map, a, t)
	{
		if (!a->pending && a->expires_ms <= now)
			drop(ac, a);
	}
	if (HASH_COUNT(ac->map) < ac->max)
		return;
	HASH_ITER(hh, ac->map, a, t)
	{
		if (!a->pending)
			drop(ac, a);
	}
}

enum kube_err kube_access_review_cached(struct kube_accesscache *ac, struct kube_client *c, const cJSON *user_info,
					const struct kube_access_attrs *attrs, int *allowed, char *reason,
					size_t reasonlen, struct kube_error *err, enum kube_access_source *source)
{
	char key[KEY_HEX];
	enum kube_access_source src = KUBE_ACCESS_ASKED;
	if (source)
		*source = src;
	if (!ac || !attrs || make_key(user_info, attrs, key) < 0)
		return kube_access_review(c, user_info, attrs, allowed, reason, reasonlen, err);
	int64_t deadline = ktime_mono_ms() + KUBE_ACCESS_TIMEOUT_MS;
	pthread_mutex_lock(&ac->mu);
	struct answer *a;
	for (;;) {
		HASH_FIND_STR(ac->map, key, a);
		int64_t now = ktime_mono_ms();
		/* A caller that waited takes the answer it waited for even if its
		 * time ran out while the review was on its way (one slower than
		 * the TTL): that review was sent before this caller asked, so the
		 * answer is as recent as one it would ask for itself, and askers
		 * of one question still share one review. */
		if (a && !a->pending && (a->expires_ms > now || src == KUBE_ACCESS_SHARED)) {
			*allowed = a->allowed;
			if (reason && reasonlen)
				snprintf(reason, reasonlen, "%s", a->reason);
			pthread_mutex_unlock(&ac->mu);
			if (source)
				*source = src == KUBE_ACCESS_SHARED ? KUBE_ACCESS_SHARED : KUBE_ACCESS_CACHED;
			return KUBE_OK;
		}
		if (!a || !a->pending || now >= deadline)
			break;
		src = KUBE_ACCESS_SHARED; /* another caller is asking: wait for its answer */
		ktime_cond_wait_until(&ac->cv, &ac->mu, deadline);
	}
	int mine = 0;
	if (!a) {
		make_room(ac, ktime_mono_ms());
		a = xcalloc(1, sizeof *a);
		memcpy(a->key, key, sizeof key);
		HASH_ADD_STR(ac->map, key, a);
	}
	if (!a->pending) {
		a->pending = 1;
		mine = 1;
	}
	pthread_mutex_unlock(&ac->mu);
	char why[256] = "";
	/* The TTL runs from here, not from the answer: the authorizer may look
	 * as soon as it is asked, and a review can take KUBE_ACCESS_TIMEOUT_MS,
	 * which would otherwise let a revoked grant stand that much longer. */
	int64_t sent_ms = ktime_mono_ms();
	enum kube_err e = kube_access_review(c, user_info, attrs, allowed, why, sizeof why, err);
	if (reason && reasonlen)
		snprintf(reason, reasonlen, "%s", why);
	pthread_mutex_lock(&ac->mu);
	HASH_FIND_STR(ac->map, key, a);
	if (mine && a) {
		a->pending = 0;
		if (e == KUBE_OK) {
			a->allowed = *allowed;
			snprintf(a->reason, sizeof a->reason, "%s", why);
			a->expires_ms = sent_ms + (*allowed ? ac->allow_ms : ac->deny_ms);
		} else {
			drop(ac, a); /* errors are never cached: the next caller asks */
		}
		pthread_cond_broadcast(&ac->cv);
	}
	pthread_mutex_unlock(&ac->mu);
	return e;
}
