/* Whether a recorded identity may use an owner now (reauthz.h). */
#include "reconcile/reauthz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/xmalloc.h"
#include "kube/access.h"
#include "reconcile/strset.h"
#include "sandbox/authz.h"

struct sbx_reauthz {
	struct sbx_strset *allowed; /* answer keys, each for SBX_REAUTHZ_ALLOW_MS */
	struct sbx_strset *refused; /* answer keys, each for SBX_REAUTHZ_DENY_MS */
};

struct sbx_reauthz *sbx_reauthz_new(void)
{
	struct sbx_reauthz *ra = xcalloc(1, sizeof *ra);
	ra->allowed = sbx_strset_new();
	ra->refused = sbx_strset_new();
	return ra;
}

void sbx_reauthz_free(struct sbx_reauthz *ra)
{
	if (!ra)
		return;
	sbx_strset_free(ra->allowed);
	sbx_strset_free(ra->refused);
	free(ra);
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
	if (!fresh && sbx_strset_has(ra->allowed, key))
		return 1;
	if (!fresh && sbx_strset_has(ra->refused, key)) {
		snprintf(why, whylen, "refused within the last %d s", SBX_REAUTHZ_DENY_MS / 1000);
		return 0;
	}
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
	enum kube_err e = kube_access_review(kc, user, &attrs, &allowed, why, whylen, &err);
	cJSON_Delete(user);
	if (e != KUBE_OK) {
		snprintf(why, whylen, "SubjectAccessReview failed: %s", err.message);
		return -1;
	}
	sbx_strset_del(allowed ? ra->refused : ra->allowed, key);
	sbx_strset_add_for(allowed ? ra->allowed : ra->refused, key, allowed ? SBX_REAUTHZ_ALLOW_MS : SBX_REAUTHZ_DENY_MS);
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
