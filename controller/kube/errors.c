#include "kube/errors.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

static const char *const err_names[] = {
	[KUBE_OK] = "OK",
	[KUBE_ERR_NOT_FOUND] = "NotFound",
	[KUBE_ERR_ALREADY_EXISTS] = "AlreadyExists",
	[KUBE_ERR_CONFLICT] = "Conflict",
	[KUBE_ERR_GONE] = "Gone",
	[KUBE_ERR_INVALID] = "Invalid",
	[KUBE_ERR_BAD_REQUEST] = "BadRequest",
	[KUBE_ERR_TOO_MANY_REQUESTS] = "TooManyRequests",
	[KUBE_ERR_UNAUTHORIZED] = "Unauthorized",
	[KUBE_ERR_FORBIDDEN] = "Forbidden",
	[KUBE_ERR_SERVER] = "ServerError",
	[KUBE_ERR_TRANSPORT] = "Transport",
	[KUBE_ERR_DECODE] = "Decode",
	[KUBE_ERR_TOO_LARGE] = "TooLarge",
	[KUBE_ERR_OTHER] = "Other",
};

const char *kube_err_str(enum kube_err e)
{
	if ((unsigned)e < sizeof err_names / sizeof err_names[0] && err_names[e])
		return err_names[e];
	return "Unknown";
}

int kube_err_retriable(enum kube_err e)
{
	return e == KUBE_ERR_SERVER || e == KUBE_ERR_TRANSPORT || e == KUBE_ERR_DECODE ||
	       e == KUBE_ERR_TOO_MANY_REQUESTS;
}

void kube_error_set(struct kube_error *out, enum kube_err code, const char *fmt, ...)
{
	if (!out)
		return;
	memset(out, 0, sizeof *out);
	out->code = code;
	snprintf(out->reason, sizeof out->reason, "%s", kube_err_str(code));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out->message, sizeof out->message, fmt, ap);
	va_end(ap);
}

/* Maps an HTTP status (and, for 409, the Status reason) to a code. */
static enum kube_err code_for(long http, const char *reason)
{
	switch (http) {
	case 400:
		return KUBE_ERR_BAD_REQUEST;
	case 401:
		return KUBE_ERR_UNAUTHORIZED;
	case 403:
		return KUBE_ERR_FORBIDDEN;
	case 404:
		return KUBE_ERR_NOT_FOUND;
	case 409:
		return reason && !strcmp(reason, "AlreadyExists") ? KUBE_ERR_ALREADY_EXISTS
								  : KUBE_ERR_CONFLICT;
	case 410:
		return KUBE_ERR_GONE;
	case 422:
		return KUBE_ERR_INVALID;
	case 429:
		return KUBE_ERR_TOO_MANY_REQUESTS;
	default:
		break;
	}
	if (http >= 500 && http <= 599)
		return KUBE_ERR_SERVER;
	/* No usable HTTP code (a Status inside a watch stream may omit it). */
	if (http == 0 && reason) {
		static const struct {
			const char *r;
			enum kube_err e;
		} by_reason[] = {
			{ "NotFound", KUBE_ERR_NOT_FOUND },
			{ "AlreadyExists", KUBE_ERR_ALREADY_EXISTS },
			{ "Conflict", KUBE_ERR_CONFLICT },
			{ "Gone", KUBE_ERR_GONE },
			{ "Expired", KUBE_ERR_GONE },
			{ "Invalid", KUBE_ERR_INVALID },
			{ "BadRequest", KUBE_ERR_BAD_REQUEST },
			{ "TooManyRequests", KUBE_ERR_TOO_MANY_REQUESTS },
			{ "Unauthorized", KUBE_ERR_UNAUTHORIZED },
			{ "Forbidden", KUBE_ERR_FORBIDDEN },
			{ "InternalError", KUBE_ERR_SERVER },
			{ "ServerTimeout", KUBE_ERR_SERVER },
			{ "Timeout", KUBE_ERR_SERVER },
			{ "ServiceUnavailable", KUBE_ERR_SERVER },
		};
		for (size_t i = 0; i < sizeof by_reason / sizeof by_reason[0]; i++)
			if (!strcmp(reason, by_reason[i].r))
				return by_reason[i].e;
	}
	return KUBE_ERR_OTHER;
}

/* The conventional Status reason for an HTTP status, used when the body has
 * none. */
static const char *default_reason(long http)
{
	switch (http) {
	case 400:
		return "BadRequest";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "NotFound";
	case 405:
		return "MethodNotAllowed";
	case 406:
		return "NotAcceptable";
	case 409:
		return "Conflict";
	case 410:
		return "Gone";
	case 413:
		return "RequestEntityTooLarge";
	case 415:
		return "UnsupportedMediaType";
	case 422:
		return "Invalid";
	case 429:
		return "TooManyRequests";
	case 500:
		return "InternalError";
	case 503:
		return "ServiceUnavailable";
	case 504:
		return "Timeout";
	default:
		return http >= 500 ? "InternalError" : "Unknown";
	}
}

/* Parses a Retry-After value: delta-seconds or an HTTP date. Returns seconds
 * (>= 0), or -1 when unparsable. */
static int parse_retry_after(const char *v)
{
	while (*v == ' ' || *v == '\t')
		v++;
	if (isdigit((unsigned char)*v)) {
		char *end;
		long s = strtol(v, &end, 10);
		while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
			end++;
		if (*end)
			return -1;
		return s > 86400 ? 86400 : (int)s;
	}
	time_t when = curl_getdate(v, NULL);
	if (when == (time_t)-1)
		return -1;
	time_t now = time(NULL);
	if (when <= now)
		return 0;
	return when - now > 86400 ? 86400 : (int)(when - now);
}

/* Copies len bytes of body into dst as printable text (controls become '?'). */
static void excerpt(char *dst, size_t dstlen, const char *body, size_t len)
{
	size_t n = len < dstlen - 1 ? len : dstlen - 1;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)body[i];
		dst[i] = (ch < 0x20 && ch != '\t') || ch == 0x7f ? ' ' : (char)ch;
	}
	dst[n] = '\0';
	while (n > 0 && dst[n - 1] == ' ')
		dst[--n] = '\0';
}

/* Fills reason/message/retry_after_s from a Status object; returns 1 if it
 * looked like a Status. */
static int read_status(const cJSON *st, struct kube_error *out)
{
	if (!cJSON_IsObject(st))
		return 0;
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(st, "kind");
	const cJSON *reason = cJSON_GetObjectItemCaseSensitive(st, "reason");
	const cJSON *message = cJSON_GetObjectItemCaseSensitive(st, "message");
	if (!(cJSON_IsString(kind) && !strcmp(kind->valuestring, "Status")) &&
	    !cJSON_IsString(reason) && !cJSON_IsString(message))
		return 0;
	if (cJSON_IsString(reason) && reason->valuestring[0])
		snprintf(out->reason, sizeof out->reason, "%s", reason->valuestring);
	if (cJSON_IsString(message))
		snprintf(out->message, sizeof out->message, "%s", message->valuestring);
	const cJSON *details = cJSON_GetObjectItemCaseSensitive(st, "details");
	const cJSON *ra = cJSON_GetObjectItemCaseSensitive(details, "retryAfterSeconds");
	if (cJSON_IsNumber(ra) && ra->valuedouble > 0)
		out->retry_after_s = ra->valuedouble > 86400 ? 86400 : (int)ra->valuedouble;
	const cJSON *cause;
	cJSON_ArrayForEach(cause, cJSON_GetObjectItemCaseSensitive(details, "causes"))
	{
		out->ncauses_total++;
		if (out->ncauses >= KUBE_ERROR_CAUSES)
			continue;
		struct kube_error_cause *c = &out->causes[out->ncauses++];
		const cJSON *cr = cJSON_GetObjectItemCaseSensitive(cause, "reason");
		const cJSON *cf = cJSON_GetObjectItemCaseSensitive(cause, "field");
		if (cJSON_IsString(cr))
			snprintf(c->reason, sizeof c->reason, "%s", cr->valuestring);
		if (cJSON_IsString(cf))
			snprintf(c->field, sizeof c->field, "%s", cf->valuestring);
	}
	return 1;
}

void kube_error_from_response(long http, const char *body, size_t len,
			      const char *retry_after_header, struct kube_error *out)
{
	memset(out, 0, sizeof *out);
	out->http_status = http;
	cJSON *st = body && len ? cJSON_ParseWithLength(body, len) : NULL;
	int is_status = read_status(st, out);
	cJSON_Delete(st);
	if (!is_status && body && len)
		excerpt(out->message, sizeof out->message, body, len > 200 ? 200 : len);
	out->code = code_for(http, out->reason[0] ? out->reason : NULL);
	if (!out->reason[0])
		snprintf(out->reason, sizeof out->reason, "%s", default_reason(http));
	if (!out->message[0])
		snprintf(out->message, sizeof out->message, "HTTP %ld %s", http, out->reason);
	if (retry_after_header) {
		int s = parse_retry_after(retry_after_header);
		if (s >= 0)
			out->retry_after_s = s;
	}
}

void kube_error_from_status(const cJSON *status, struct kube_error *out)
{
	memset(out, 0, sizeof *out);
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(status, "code");
	if (cJSON_IsNumber(code) && code->valuedouble >= 100 && code->valuedouble < 600)
		out->http_status = (long)code->valuedouble;
	if (!read_status(status, out))
		snprintf(out->message, sizeof out->message, "malformed Status object");
	out->code = code_for(out->http_status, out->reason[0] ? out->reason : NULL);
	if (!out->reason[0])
		snprintf(out->reason, sizeof out->reason, "%s", default_reason(out->http_status));
}
