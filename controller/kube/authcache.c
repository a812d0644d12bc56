#include "kube/authcache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <uthash.h>

#include "base/xmalloc.h"
#include "base/ktime.h"

struct answer {
	char key[65 + 8 + 256]; /* sha256(token) hex, verb, path */
	int status;
	char user[256];
	int64_t expires_ms;
	UT_hash_handle hh;
};

struct kube_authcache {
	pthread_mutex_t mu;
	struct answer *map;
	size_t n;
};

struct kube_authcache *kube_authcache_new(void)
{
	struct kube_authcache *c = xcalloc(1, sizeof *c);
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

static void clear(struct kube_authcache *c)
{
	struct answer *a, *tmp;
	HASH_ITER(hh, c->map, a, tmp)
	{
		HASH_DEL(c->map, a);
		free(a);
	}
	c->n = 0;
}

void kube_authcache_free(struct kube_authcache *c)
{
	if (!c)
		return;
	clear(c);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* The lookup key; 0, or -1 when path or verb is too long to be cached. */
static int make_key(const char *token, const char *verb, const char *path, char out[sizeof((struct answer *)0)->key])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	if (strlen(verb) > 7 || strlen(path) > 255 ||
	    EVP_Digest(token, strlen(token), md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		return -1;
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = hx[md[i] >> 4];
		out[2 * i + 1] = hx[md[i] & 15];
	}
	snprintf(out + 64, sizeof((struct answer *)0)->key - 64, " %s %s", verb, path);
	OPENSSL_cleanse(md, sizeof md);
	return 0;
}

int kube_authcache_get(struct kube_authcache *c, const char *token, const char *verb, const char *path, char *user,
		       size_t userlen)
{
	char key[sizeof((struct answer *)0)->key];
	if (make_key(token, verb, path, key) < 0)
		return 0;
	int status = 0;
	pthread_mutex_lock(&c->mu);
	struct answer *a;
	HASH_FIND_STR(c->map, key, a);
	if (a && a->expires_ms <= ktime_mono_ms()) {
		HASH_DEL(c->map, a);
		free(a);
		c->n--;
		a = NULL;
	}
	if (a) {
		status = a->status;
		snprintf(user, userlen, "%s", a->user);
	}
	pthread_mutex_unlock(&c->mu);
	return status;
}

void kube_authcache_put(struct kube_authcache *c, const char *token, const char *verb, const char *path, int status,
			const char *user)
{
	char key[sizeof((struct answer *)0)->key];
	if ((status != 200 && status != 401 && status != 403) || make_key(token, verb, path, key) < 0)
		return;
	pthread_mutex_lock(&c->mu);
	struct answer *a;
	HASH_FIND_STR(c->map, key, a);
	if (!a) {
		if (c->n >= KUBE_AUTHCACHE_MAX)
			clear(c);
		a = xcalloc(1, sizeof *a);
		memcpy(a->key, key, sizeof key);
		HASH_ADD_STR(c->map, key, a);
		c->n++;
	}
	a->status = status;
	snprintf(a->user, sizeof a->user, "%s", user ? user : "");
	a->expires_ms = ktime_mono_ms() + (status == 200 ? KUBE_AUTHCACHE_ALLOW_MS : KUBE_AUTHCACHE_DENY_MS);
	pthread_mutex_unlock(&c->mu);
}
