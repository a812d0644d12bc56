#include "kube/watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/xmalloc.h"

struct watch_parser {
	struct buf line; /* the incomplete line so far; its cap is max_line */
};

static const char *const type_names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };

struct watch_parser *watch_parser_new(size_t max_line)
{
	struct watch_parser *p = xcalloc(1, sizeof *p);
	buf_init(&p->line, max_line);
	return p;
}

void watch_parser_free(struct watch_parser *p)
{
	if (!p)
		return;
	buf_release(&p->line);
	free(p);
}

const char *watch_event_type_str(enum watch_event_type t)
{
	return (unsigned)t < 5 ? type_names[t] : "UNKNOWN";
}

/* Parses one complete line and calls cb. Returns 0, 1 (cb said stop) or -1. */
static int parse_line(const char *s, size_t len,
		      int (*cb)(void *ctx, enum watch_event_type t, const cJSON *obj), void *ctx,
		      char *msg, size_t msglen)
{
	while (len && (s[len - 1] == '\r' || s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	size_t i = 0;
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i == len)
		return 0;
	int excerpt = len - i > 60 ? 60 : (int)(len - i);
	const char *end = NULL;
	cJSON *ev = cJSON_ParseWithLengthOpts(s + i, len - i, &end, 0);
	if (ev && end != s + len) {
		cJSON_Delete(ev);
		ev = NULL;
	}
	if (!ev) {
		snprintf(msg, msglen, "watch: line is not JSON: %.*s", excerpt, s + i);
		return -1;
	}
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(ev, "type");
	const cJSON *obj = cJSON_GetObjectItemCaseSensitive(ev, "object");
	int t = -1;
	for (int k = 0; cJSON_IsString(type) && k < 5; k++)
		if (!strcmp(type->valuestring, type_names[k]))
			t = k;
	int rc = 0;
	if (!cJSON_IsObject(ev) || t < 0) {
		snprintf(msg, msglen, "watch: event without a known type: %.*s", excerpt, s + i);
		rc = -1;
	} else if (!cJSON_IsObject(obj)) {
		snprintf(msg, msglen, "watch: %s event without an object", type_names[t]);
		rc = -1;
	} else if (cb(ctx, (enum watch_event_type)t, obj)) {
		rc = 1;
	}
	cJSON_Delete(ev);
	return rc;
}

int watch_parser_feed(struct watch_parser *p, const char *data, size_t n,
		      int (*cb)(void *ctx, enum watch_event_type t, const cJSON *obj), void *ctx,
		      char *msg, size_t msglen)
{
	while (n > 0) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) : n;
		int rc;
		if (!nl) {
			if (buf_append(&p->line, data, take) < 0)
				goto too_long;
			return 0;
		}
		/* Lines are parsed from the NUL-terminated buffer, never in place, so
		 * the JSON parser cannot read past a chunk. */
		if (buf_append(&p->line, data, take) < 0)
			goto too_long;
		rc = parse_line(p->line.data, p->line.len, cb, ctx, msg, msglen);
		buf_reset(&p->line);
		if (rc != 0) {
			buf_reset(&p->line);
			return rc;
		}
		data += take + 1;
		n -= take + 1;
	}
	return 0;
too_long:
	snprintf(msg, msglen, "watch: event line exceeds %zu bytes", p->line.cap);
	buf_reset(&p->line);
	return -1;
}
