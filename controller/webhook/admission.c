#include "webhook/admission.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/jsoncount.h"
#include "base/xmalloc.h"

static const char *str_at(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *obj_at(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsObject(v) ? v : NULL;
}

static int dfail(char *err, size_t errlen, const char *msg)
{
	snprintf(err, errlen, "%s", msg);
	return -1;
}

/* Adds the bytes of string s to *total; 1 when s is not a string. */
static int add_string(const cJSON *s, size_t *total)
{
	if (!cJSON_IsString(s))
		return 1;
	*total += strlen(s->valuestring);
	return 0;
}

int wh_identity_check(const cJSON *user_info, char *why, size_t whylen)
{
	size_t total = 0;
	const char *u = str_at(user_info, "username");
	if (u && strlen(u) > WH_USERNAME_MAX) {
		snprintf(why, whylen, "the username is longer than %d bytes", WH_USERNAME_MAX);
		return -1;
	}
	if (u)
		total += strlen(u);
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(user_info, "uid");
	if (uid && add_string(uid, &total)) {
		snprintf(why, whylen, "userInfo.uid is not a string");
		return -1;
	}
	const cJSON *groups = cJSON_GetObjectItemCaseSensitive(user_info, "groups"), *g;
	if (cJSON_GetArraySize(groups) > WH_GROUPS_MAX) {
		snprintf(why, whylen, "the identity has more than %d groups", WH_GROUPS_MAX);
		return -1;
	}
	cJSON_ArrayForEach(g, groups)
	{
		if (add_string(g, &total)) {
			snprintf(why, whylen, "userInfo.groups holds a value that is not a string");
			return -1;
		}
	}
	const cJSON *extra = cJSON_GetObjectItemCaseSensitive(user_info, "extra"), *kv, *v;
	if (cJSON_GetArraySize(extra) > WH_EXTRA_KEYS_MAX) {
		snprintf(why, whylen, "userInfo.extra has more than %d keys", WH_EXTRA_KEYS_MAX);
		return -1;
	}
	cJSON_ArrayForEach(kv, extra)
	{
		total += kv->string ? strlen(kv->string) : 0;
		cJSON_ArrayForEach(v, kv)
		{
			if (add_string(v, &total)) {
				snprintf(why, whylen, "userInfo.extra holds a value that is not a string");
				return -1;
			}
		}
	}
	if (total > WH_IDENTITY_BYTES_MAX) {
		snprintf(why, whylen, "the identity holds more than %d bytes", WH_IDENTITY_BYTES_MAX);
		return -1;
	}
	return 0;
}

int wh_review_decode(const char *body, size_t len, struct wh_review *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	if (!body || len == 0)
		return dfail(err, errlen, "empty AdmissionReview");
	if (len > WH_REVIEW_MAX)
		return dfail(err, errlen, "AdmissionReview larger than a Sandbox review can be");
	if (json_count_values(body, len) > WH_REVIEW_MAX_NODES)
		return dfail(err, errlen, "AdmissionReview holds more JSON values than a Sandbox review can");
	cJSON *root = cJSON_ParseWithLength(body, len);
	if (!root)
		return dfail(err, errlen, "AdmissionReview is not valid JSON");
	const char *av = str_at(root, "apiVersion"), *kind = str_at(root, "kind");
	const cJSON *req = obj_at(root, "request");
	const cJSON *rk = obj_at(req, "kind"), *rr = obj_at(req, "resource"), *ui = obj_at(req, "userInfo");
	if (!av || strcmp(av, "admission.k8s.io/v1") || !kind || strcmp(kind, "AdmissionReview")) {
		cJSON_Delete(root);
		return dfail(err, errlen, "not an admission.k8s.io/v1 AdmissionReview");
	}
	out->root = root;
	out->uid = str_at(req, "uid");
	out->operation = str_at(req, "operation");
	out->group = str_at(rk, "group");
	out->kind = str_at(rk, "kind");
	out->resource = str_at(rr, "resource");
	out->subresource = str_at(req, "subResource");
	out->ns = str_at(req, "namespace");
	out->name = str_at(req, "name");
	out->dry_run = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "dryRun"));
	out->user_info = ui;
	out->username = str_at(ui, "username");
	out->object = obj_at(req, "object");
	out->old_object = obj_at(req, "oldObject");
	if (!out->uid || !*out->uid || !out->operation || !out->kind || !out->username) {
		wh_review_release(out);
		return dfail(err, errlen, "AdmissionReview request lacks uid, operation, kind or userInfo.username");
	}
	return 0;
}

void wh_review_release(struct wh_review *r)
{
	cJSON_Delete(r->root);
	memset(r, 0, sizeof *r);
}

void wh_verdict_allow(struct wh_verdict *v)
{
	memset(v, 0, sizeof *v);
	v->allowed = 1;
	v->code = 200;
	v->outcome = "allowed";
}

void wh_verdict_deny(struct wh_verdict *v, int code, const char *reason, const char *fmt, ...)
{
	memset(v, 0, sizeof *v);
	v->code = code;
	v->reason = reason;
	v->outcome = code >= 500 ? "error" : "denied";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->message, sizeof v->message, fmt, ap);
	va_end(ap);
}

void wh_verdict_release(struct wh_verdict *v)
{
	cJSON_Delete(v->patch);
	v->patch = NULL;
}

char *wh_response_encode(const char *uid, const struct wh_verdict *v)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "apiVersion", "admission.k8s.io/v1");
	cJSON_AddStringToObject(root, "kind", "AdmissionReview");
	cJSON *resp = cJSON_AddObjectToObject(root, "response");
	cJSON_AddStringToObject(resp, "uid", uid ? uid : "");
	cJSON_AddBoolToObject(resp, "allowed", v->allowed);
	if (!v->allowed) {
		cJSON *st = cJSON_AddObjectToObject(resp, "status");
		cJSON_AddNumberToObject(st, "code", v->code);
		if (v->reason)
			cJSON_AddStringToObject(st, "reason", v->reason);
		cJSON_AddStringToObject(st, "message", v->message);
	} else if (v->patch && cJSON_GetArraySize(v->patch) > 0) {
		char *p = cJSON_PrintUnformatted(v->patch);
		size_t pl = strlen(p);
		char *b64 = xmalloc(4 * ((pl + 2) / 3) + 1);
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)p, (int)pl);
		cJSON_AddStringToObject(resp, "patchType", "JSONPatch");
		cJSON_AddStringToObject(resp, "patch", b64);
		free(b64);
		free(p);
	}
	char *s = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return s;
}

/* Quotes a user string for a message: printable ASCII, shortened. */
void wh_quote(const char *s, char *out, size_t outlen)
{
	size_t o = 0;
	for (; s && *s && o + 5 < outlen; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
	}
	if (s && *s && o + 4 <= outlen) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o < outlen ? o : outlen - 1] = '\0';
}

void wh_json_pointer_escape(const char *tok, char *out, size_t outlen)
{
	size_t o = 0;
	for (; *tok && o + 3 < outlen; tok++) {
		if (*tok == '~') {
			out[o++] = '~';
			out[o++] = '0';
		} else if (*tok == '/') {
			out[o++] = '~';
			out[o++] = '1';
		} else {
			out[o++] = *tok;
		}
	}
	if (outlen)
		out[o < outlen ? o : outlen - 1] = '\0';
}
