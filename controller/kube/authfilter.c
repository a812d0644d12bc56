#include "kube/authfilter.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "base/fault.h"
#include "kube/access.h"
#include "obs/log.h"

/* Writes status and a one-line body. */
static void deny(struct obs_http_resp *resp, int status, const char *msg)
{
	resp->status = status;
	buf_appends(&resp->body, msg);
	buf_appends(&resp->body, "\n");
}

void kube_authfilter_serve(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp)
{
	const struct kube_authfilter *f = ctx;
	const char *h = obs_http_req_header(req, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
		deny(resp, 401, "Unauthorized: a bearer token is required");
		return;
	}
	const char *token = h + 7;
	while (*token == ' ')
		token++;
	size_t n = strlen(token);
	if (n == 0 || n > KUBE_AUTHFILTER_TOKEN_MAX) {
		deny(resp, 401, "Unauthorized");
		return;
	}
	char verb[16], who[256] = "";
	size_t i;
	for (i = 0; i < sizeof verb - 1 && req->method[i]; i++)
		verb[i] = (char)tolower((unsigned char)req->method[i]);
	verb[i] = '\0';
	int cached = f->cache ? kube_authcache_get(f->cache, token, verb, req->path, who, sizeof who) : 0;
	if (cached == 401) {
		deny(resp, 401, "Unauthorized");
		return;
	}
	if (cached == 403) {
		resp->status = 403;
		buf_appendf(&resp->body, "Forbidden: user \"%s\" may not %s %s\n", who, verb, req->path);
		return;
	}
	if (cached == 200) {
		f->next(f->next_ctx, req, resp);
		return;
	}
	cJSON *user = NULL;
	struct kube_error ke;
	fault_delay("token-review"); /* tests: a slow API server, a token no cache holds */
	if (kube_token_review(f->kc, token, NULL, &user, &ke) != KUBE_OK) {
		log_kv(LOG_WARN, "token review failed", "path", req->path, "error", ke.message);
		deny(resp, 503, "authentication is unavailable");
		return;
	}
	if (!user) {
		if (f->cache)
			kube_authcache_put(f->cache, token, verb, req->path, 401, NULL);
		deny(resp, 401, "Unauthorized");
		return;
	}
	const struct kube_access_attrs attrs = { .verb = verb, .path = req->path };
	int allowed = 0;
	char reason[256] = "";
	enum kube_err e = kube_access_review(f->kc, user, &attrs, &allowed, reason, sizeof reason, &ke);
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(user, "username");
	snprintf(who, sizeof who, "%s", cJSON_IsString(name) ? name->valuestring : "");
	cJSON_Delete(user);
	if (e != KUBE_OK) {
		log_kv(LOG_WARN, "access review failed", "path", req->path, "error", ke.message);
		deny(resp, 503, "authorization is unavailable");
		return;
	}
	if (f->cache)
		kube_authcache_put(f->cache, token, verb, req->path, allowed ? 200 : 403, who);
	if (!allowed) {
		resp->status = 403;
		buf_appendf(&resp->body, "Forbidden: user \"%s\" may not %s %s\n", who, verb, req->path);
		return;
	}
	f->next(f->next_ctx, req, resp);
}
