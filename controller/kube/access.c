#include "kube/access.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add_str(cJSON *o, const char *k, const char *v)
{
	if (v)
		cJSON_AddStringToObject(o, k, v);
}

/* Copies member k of src into dst when it has the expected type. */
static void copy_member(cJSON *dst, const char *dk, const cJSON *src, const char *sk, int want_array)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(src, sk);
	if (v && (want_array ? cJSON_IsArray(v) : cJSON_IsObject(v)))
		cJSON_AddItemToObject(dst, dk, cJSON_Duplicate(v, 1));
}

enum kube_err kube_access_review(struct kube_client *c, const cJSON *user_info, const struct kube_access_attrs *a,
				 int *allowed, char *reason, size_t reasonlen, struct kube_error *err)
{
	*allowed = 0;
	if (reason && reasonlen)
		reason[0] = '\0';
	const cJSON *user = cJSON_GetObjectItemCaseSensitive(user_info, "username");
	if (!cJSON_IsString(user) || !a || !a->verb) {
		kube_error_set(err, KUBE_ERR_OTHER, "%s", "access review needs a username and a verb");
		return KUBE_ERR_OTHER;
	}
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "apiVersion", "authorization.k8s.io/v1");
	cJSON_AddStringToObject(req, "kind", "SubjectAccessReview");
	cJSON *spec = cJSON_AddObjectToObject(req, "spec");
	cJSON_AddStringToObject(spec, "user", user->valuestring);
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(user_info, "uid");
	if (cJSON_IsString(uid))
		cJSON_AddStringToObject(spec, "uid", uid->valuestring);
	copy_member(spec, "groups", user_info, "groups", 1);
	copy_member(spec, "extra", user_info, "extra", 0);
	if (a->path) {
		cJSON *nr = cJSON_AddObjectToObject(spec, "nonResourceAttributes");
		add_str(nr, "path", a->path);
		add_str(nr, "verb", a->verb);
	} else {
		cJSON *ra = cJSON_AddObjectToObject(spec, "resourceAttributes");
		add_str(ra, "namespace", a->ns);
		add_str(ra, "verb", a->verb);
		add_str(ra, "group", a->group ? a->group : "");
		add_str(ra, "resource", a->resource);
		add_str(ra, "subresource", a->subresource);
		add_str(ra, "name", a->name);
	}
	char *body = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	cJSON *resp = NULL;
	/* An admission webhook waits on this: answer well inside its timeout. */
	const struct kube_request_opts ro = { .timeout_ms = KUBE_ACCESS_TIMEOUT_MS };
	enum kube_err e = kube_request_ex(c, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", NULL,
					  body, NULL, &ro, &resp, err);
	free(body);
	if (e != KUBE_OK)
		return e;
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(resp, "status");
	const cJSON *al = cJSON_GetObjectItemCaseSensitive(st, "allowed");
	if (!cJSON_IsBool(al)) {
		cJSON_Delete(resp);
		kube_error_set(err, KUBE_ERR_DECODE, "%s", "SubjectAccessReview answer has no status.allowed");
		return KUBE_ERR_DECODE;
	}
	/* "denied" only ever strengthens a refusal: allowed must be true and denied not. */
	*allowed = cJSON_IsTrue(al) && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "denied"));
	if (reason && reasonlen) {
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(st, "reason");
		const cJSON *ev = cJSON_GetObjectItemCaseSensitive(st, "evaluationError");
		snprintf(reason, reasonlen, "%s%s%s", cJSON_IsString(r) ? r->valuestring : "",
			 cJSON_IsString(ev) && cJSON_IsString(r) ? "; " : "",
			 cJSON_IsString(ev) ? ev->valuestring : "");
	}
	cJSON_Delete(resp);
	return KUBE_OK;
}

enum kube_err kube_token_review(struct kube_client *c, const char *token, const char *const *audiences,
				cJSON **user_out, struct kube_error *err)
{
	*user_out = NULL;
	if (!token || !*token) {
		kube_error_set(err, KUBE_ERR_OTHER, "%s", "no token to review");
		return KUBE_ERR_OTHER;
	}
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "apiVersion", "authentication.k8s.io/v1");
	cJSON_AddStringToObject(req, "kind", "TokenReview");
	cJSON *spec = cJSON_AddObjectToObject(req, "spec");
	cJSON_AddStringToObject(spec, "token", token);
	if (audiences) {
		cJSON *aud = cJSON_AddArrayToObject(spec, "audiences");
		for (; *audiences; audiences++)
			cJSON_AddItemToArray(aud, cJSON_CreateString(*audiences));
	}
	char *body = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	cJSON *resp = NULL;
	const struct kube_request_opts ro = { .timeout_ms = KUBE_ACCESS_TIMEOUT_MS };
	enum kube_err e = kube_request_ex(c, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", NULL, body,
					  NULL, &ro, &resp, err);
	/* The token was in the body: wipe our copy. */
	memset(body, 0, strlen(body));
	free(body);
	if (e != KUBE_OK)
		return e;
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(resp, "status");
	const cJSON *user = cJSON_GetObjectItemCaseSensitive(st, "user");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "authenticated")) && cJSON_IsObject(user) &&
	    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(user, "username")))
		*user_out = cJSON_Duplicate(user, 1);
	cJSON_Delete(resp);
	return KUBE_OK;
}
