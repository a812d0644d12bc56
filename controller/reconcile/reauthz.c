/* Whether a recorded identity may use an owner now (reauthz.h). */
#include "reconcile/reauthz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/ktime.h"
#include "base/strmap.h"
#include "base/xmalloc.h"
#include "kube/access.h"
#include "sandbox/authz.h"

/* An answer kept: given to a question asked at asked_ms, it stands until
 * until_ms (ktime_mono_ms), its time from asked_ms. */
struct answer {
	int64_t asked_ms, until_ms;
	int allowed;
	char why[160]; /* the authorizer's reason, cut */
};

struct sbx_reauthz {
	struct strmap *answers; /* answer key -> struct answer */
	unsigned long puts;	/* answers kept: every 1,024th sweeps a large map */
};

/* Past this many answers, those long expired go (every 1,024 kept). */
#define ANSWERS_SWEEP_AT 4096
/* An expired answer is forgotten this long after its time is up: past any
 * question still on its way that was asked before it. */
#define ANSWER_FORGET_MS 120000

struct sbx_reauthz *sbx_reauthz_new(void)
{
	struct sbx_reauthz *ra = xcalloc(1, sizeof *ra);
	ra->answers = strmap_new(sizeof(struct answer));
	return ra;
}

void sbx_reauthz_free(struct sbx_reauthz *ra)
{
	if (!ra)
		return;
	strmap_free(ra->answers);
	free(ra);
}

static int forgotten(const void *value, void *ctx)
{
	const struct answer *a = value;
	return a->until_ms + ANSWER_FORGET_MS < *(const int64_t *)ctx;
}

int sbx_reauthz_keep(struct sbx_reauthz *ra, const char *key, int allowed, const char *why, int64_t asked_ms,
		     int64_t now_ms)
{
	strmap_lock(ra->answers);
	if (strmap_count(ra->answers) >= ANSWERS_SWEEP_AT && (++ra->puts & 1023) == 0)
		strmap_sweep(ra->answers, forgotten, &now_ms);
	int created = 0;
	struct answer *a = strmap_put(ra->answers, key, &created);
	/* An answer to a question asked before the one kept (answered late:
	 * two checks at once) never replaces it: a grant taken away between
	 * the two questions stays taken away. */
	int kept = a && (created || a->asked_ms <= asked_ms);
	if (kept) {
		a->asked_ms = asked_ms;
		/* From the question, not the answer: the authorizer may have
		 * looked as soon as it was asked, and a review can take
		 * KUBE_ACCESS_TIMEOUT_MS, which would stretch a revocation's
		 * delay by as much. */
		a->until_ms = asked_ms + (allowed ? SBX_REAUTHZ_ALLOW_MS : SBX_REAUTHZ_DENY_MS);
		a->allowed = allowed;
		snprintf(a->why, sizeof a->why, "%s", why ? why : "");
	}
	strmap_unlock(ra->answers);
	return kept;
}

int sbx_reauthz_kept(struct sbx_reauthz *ra, const char *key, int64_t now_ms, char *why, size_t whylen)
{
	if (why && whylen)
		why[0] = '\0';
	strmap_lock(ra->answers);
	const struct answer *a = strmap_get(ra->answers, key);
	int r = a && a->until_ms > now_ms ? a->allowed : -1;
	if (r >= 0 && why && whylen)
		snprintf(why, whylen, "%s", a->why);
	strmap_unlock(ra->answers);
	return r;
}

/* The key of a question: the first 32 hex digits of SHA-256 over the
 * identity (or the username alone, marked apart), the namespace, the
 * resource and its name, each NUL-terminated (none of them holds a NUL).
 * 0, or -1. */
static int answer_key(const char *identity, const char *username, const char *ns, const char *resource,
		      const char *owner, char out[33])
{
	static const char hx[] = "0123456789abcdef";
	unsigned char md[32];
	unsigned int n = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	const char *who = identity ? identity : username;
	int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
		 EVP_DigestUpdate(ctx, identity ? "i" : "u", 1) == 1 &&
		 EVP_DigestUpdate(ctx, who, strlen(who) + 1) == 1 && EVP_DigestUpdate(ctx, ns, strlen(ns) + 1) == 1 &&
		 EVP_DigestUpdate(ctx, resource, strlen(resource) + 1) == 1 &&
		 EVP_DigestUpdate(ctx, owner, strlen(owner) + 1) == 1 && EVP_DigestFinal_ex(ctx, md, &n) == 1 && n == 32;
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return -1;
	for (int i = 0; i < 16; i++) {
		out[2 * i] = hx[md[i] >> 4];
		out[2 * i + 1] = hx[md[i] & 15];
	}
	out[32] = '\0';
	return 0;
}

/* sbx_reauthz_check of `use` on resource (group sandbox.dev) name in ns
 * ("": cluster-scoped). */
static int check_use(struct sbx_reauthz *ra, struct kube_client *kc, const char *identity, const char *username,
		     const char *ns, const char *resource, const char *owner, int fresh, char *why, size_t whylen)
{
	char key[33];
	why[0] = '\0';
	if ((!identity && !username) || !ns || !owner || answer_key(identity, username, ns, resource, owner, key) < 0) {
		snprintf(why, whylen, "no identity recorded to ask about");
		return -1;
	}
	/* A kept answer gives its reason again, so a message built from it
	 * reads the same as the one built from the question. */
	int kept = fresh ? -1 : sbx_reauthz_kept(ra, key, ktime_mono_ms(), why, whylen);
	if (kept >= 0)
		return kept;
	cJSON *user = identity ? sbx_authz_identity_parse(identity) : cJSON_CreateObject();
	if (!user) {
		snprintf(why, whylen, "the recorded identity does not parse");
		return -1;
	}
	if (!identity)
		cJSON_AddStringToObject(user, "username", username);
	const struct kube_access_attrs attrs = { .ns = ns[0] ? ns : NULL, .verb = "use", .group = "sandbox.dev", .resource = resource, .name = owner };
	int allowed = 0;
	struct kube_error err;
	int64_t asked = ktime_mono_ms();
	enum kube_err e = kube_access_review(kc, user, &attrs, &allowed, why, whylen, &err);
	cJSON_Delete(user);
	if (e != KUBE_OK) {
		snprintf(why, whylen, "SubjectAccessReview failed: %s", err.message);
		return -1;
	}
	int64_t now = ktime_mono_ms();
	if (!sbx_reauthz_keep(ra, key, allowed, why, asked, now) && (kept = sbx_reauthz_kept(ra, key, now, why, whylen)) >= 0)
		return kept; /* the answer to a later question stands, with its reason */
	return allowed;
}

int sbx_reauthz_check(struct sbx_reauthz *ra, struct kube_client *kc, const char *identity, const char *username,
		      const char *ns, const char *owner, int fresh, char *why, size_t whylen)
{
	if (!ns || !ns[0]) {
		snprintf(why, whylen, "no namespace to ask about");
		return -1;
	}
	return check_use(ra, kc, identity, username, ns, "workspaces", owner, fresh, why, whylen);
}

int sbx_reauthz_check_profile(struct sbx_reauthz *ra, struct kube_client *kc, const char *identity,
			      const char *username, const char *profile, int fresh, char *why, size_t whylen)
{
	return check_use(ra, kc, identity, username, "", "sandboxnetworkprofiles", profile, fresh, why, whylen);
}
