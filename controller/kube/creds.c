/* Credential snapshots and token files (creds.h). */
#include "kube/creds.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/buf.h"
#include "base/ktime.h"
#include "base/xmalloc.h"

struct kube_creds *kube_creds_new(const char *token, const char *cert, size_t cert_len,
				  const char *key, size_t key_len)
{
	struct kube_creds *cr = xcalloc(1, sizeof *cr);
	cr->refs = 1;
	cr->token = xstrdup(token);
	if (cert) {
		cr->cert = xmalloc(cert_len + 1);
		memcpy(cr->cert, cert, cert_len);
		cr->cert[cert_len] = '\0';
		cr->cert_len = cert_len;
	}
	if (key) {
		cr->key = xmalloc(key_len + 1);
		memcpy(cr->key, key, key_len);
		cr->key[key_len] = '\0';
		cr->key_len = key_len;
	}
	return cr;
}

void kube_creds_put(struct kube_creds *cr)
{
	if (!cr || __atomic_sub_fetch(&cr->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	free(cr->token);
	if (cr->key)
		OPENSSL_cleanse(cr->key, cr->key_len);
	free(cr->cert);
	free(cr->key);
	free(cr);
}

char *kube_token_file_read(struct kube_token_file *t, char *err, size_t errlen)
{
	struct stat st;
	if (stat(t->path, &st) < 0) {
		snprintf(err, errlen, "token file %s: %s", t->path, strerror(errno));
		return NULL;
	}
	char *tok = buf_load(t->path, KUBE_TOKEN_MAX, NULL, err, errlen);
	if (!tok)
		return NULL;
	str_rstrip(tok);
	if (!tok[0]) {
		snprintf(err, errlen, "token file %s is empty", t->path);
		free(tok);
		return NULL;
	}
	t->st = st;
	t->checked_ms = ktime_mono_ms();
	return tok;
}

/* 1 when a and b are the same file in the same state. */
static int same_file_state(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int kube_token_file_changed(struct kube_token_file *t, int64_t now_ms)
{
	struct stat st;
	int changed = stat(t->path, &st) < 0 || !same_file_state(&st, &t->st);
	t->checked_ms = now_ms;
	return changed;
}
