/* Unit tests for the watch stream parser: chunking at every byte boundary,
 * oversized and malformed lines, every event type. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/buf.h"
#include "kube/errors.h"
#include "kube/watch.h"
#include "test_suites.h"

void register_kube_watch_tests(void);

/* Appends "TYPE name rv|" (or "ERROR code reason|") for each event. */
static int record(void *ctx, enum watch_event_type t, const cJSON *obj)
{
	struct buf *b = ctx;
	if (t == WATCH_ERROR) {
		struct kube_error e;
		kube_error_from_status(obj, &e);
		buf_appendf(b, "ERROR %ld %s %s|", e.http_status, e.reason, kube_err_str(e.code));
		return 0;
	}
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(md, "name");
	const cJSON *rv = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
	buf_appendf(b, "%s %s %s|", watch_event_type_str(t),
		    cJSON_IsString(name) ? name->valuestring : "-",
		    cJSON_IsString(rv) ? rv->valuestring : "-");
	return 0;
}

static char *load_stream(size_t *len)
{
	struct buf b;
	buf_init(&b, 1 << 20);
	if (buf_read_file(&b, SBX_TEST_DATA "/kube/watch-stream.jsonl") < 0)
		return NULL;
	*len = b.len;
	return buf_detach(&b);
}

static const char *const want =
    "ADDED a 101|MODIFIED a 102|BOOKMARK - 150|DELETED a 151|ADDED b 152|"
    "ERROR 410 Expired Gone|MODIFIED b 153|";

/* Feeds s in pieces cut at the given offsets and returns what was recorded. */
static char *feed_split(const char *s, size_t n, const size_t *cuts, size_t ncuts)
{
	struct watch_parser *p = watch_parser_new(4096);
	struct buf got;
	buf_init(&got, 1 << 16);
	char msg[256];
	size_t at = 0;
	for (size_t i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : n;
		if (watch_parser_feed(p, s + at, end - at, record, &got, msg, sizeof msg) != 0)
			buf_appendf(&got, "FAIL(%s)", msg);
		at = end;
	}
	watch_parser_free(p);
	return buf_detach(&got);
}

static void test_every_split(void)
{
	size_t n = 0;
	char *s = load_stream(&n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	char *whole = feed_split(s, n, NULL, 0);
	CU_ASSERT_STRING_EQUAL(whole, want);
	free(whole);
	int bad = 0;
	for (size_t i = 0; i <= n; i++) {
		char *got = feed_split(s, n, &i, 1);
		if (strcmp(got, want)) {
			if (!bad)
				fprintf(stderr, "split at %zu: %s\n", i, got);
			bad++;
		}
		free(got);
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* Two cuts, on a coarser grid. */
	for (size_t i = 0; i <= n; i += 13) {
		for (size_t j = i; j <= n; j += 29) {
			size_t cuts[2] = { i, j };
			char *got = feed_split(s, n, cuts, 2);
			if (strcmp(got, want))
				bad++;
			free(got);
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	free(s);
}

static void test_byte_at_a_time(void)
{
	size_t n = 0;
	char *s = load_stream(&n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	size_t *cuts = malloc(n * sizeof *cuts);
	for (size_t i = 0; i < n; i++)
		cuts[i] = i;
	char *got = feed_split(s, n, cuts, n);
	CU_ASSERT_STRING_EQUAL(got, want);
	free(got);
	free(cuts);
	free(s);
}

static int feed_str(struct watch_parser *p, const char *s, struct buf *got, char *msg, size_t ml)
{
	return watch_parser_feed(p, s, strlen(s), record, got, msg, ml);
}

static void test_oversized_line(void)
{
	char msg[256] = "";
	struct buf got;
	buf_init(&got, 4096);
	/* A line of exactly max_line bytes is accepted; one more byte is not. */
	const char *ok = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"}}}";
	size_t len = strlen(ok);
	struct watch_parser *p = watch_parser_new(len);
	CU_ASSERT_EQUAL(feed_str(p, ok, &got, msg, sizeof msg), 0);
	CU_ASSERT_EQUAL(feed_str(p, "\n", &got, msg, sizeof msg), 0);
	CU_ASSERT_STRING_EQUAL(got.data, "ADDED x -|");
	const char *big = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"xy\"}}}\n";
	CU_ASSERT_EQUAL(feed_str(p, big, &got, msg, sizeof msg), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "exceeds"));
	watch_parser_free(p);

	/* Oversized while arriving in small chunks, without any newline. */
	p = watch_parser_new(64);
	msg[0] = '\0';
	int rc = 0;
	for (int i = 0; i < 100 && rc == 0; i++)
		rc = watch_parser_feed(p, "aaaaaaaa", 8, record, &got, msg, sizeof msg);
	CU_ASSERT_EQUAL(rc, -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "64"));
	watch_parser_free(p);
	buf_release(&got);
}

static void test_malformed(void)
{
	static const struct {
		const char *line;
		const char *msg;
	} cases[] = {
		{ "{\"type\":\"ADDED\",\"object\":{\"metadata\":{}}\n", "not JSON" },
		{ "not json at all\n", "not JSON" },
		{ "{\"type\":\"ADDED\",\"object\":{}} trailing\n", "not JSON" },
		{ "{\"object\":{\"metadata\":{}}}\n", "type" },
		{ "{\"type\":\"RENAMED\",\"object\":{}}\n", "type" },
		{ "{\"type\":7,\"object\":{}}\n", "type" },
		{ "[1,2]\n", "type" },
		{ "{\"type\":\"ADDED\"}\n", "without an object" },
		{ "{\"type\":\"DELETED\",\"object\":\"x\"}\n", "without an object" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct watch_parser *p = watch_parser_new(4096);
		struct buf got;
		buf_init(&got, 4096);
		char msg[256] = "";
		CU_ASSERT_EQUAL(feed_str(p, cases[i].line, &got, msg, sizeof msg), -1);
		if (!strstr(msg, cases[i].msg))
			fprintf(stderr, "case %zu: %s\n", i, msg);
		CU_ASSERT_PTR_NOT_NULL(strstr(msg, cases[i].msg));
		CU_ASSERT_EQUAL(got.len, 0);
		buf_release(&got);
		watch_parser_free(p);
	}
}

static void test_events_and_blank_lines(void)
{
	struct watch_parser *p = watch_parser_new(4096);
	struct buf got;
	buf_init(&got, 4096);
	char msg[256];
	const char *s =
	    "\n  "
	    "\r\n{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n"
	    "\t{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500,\"reason\":"
	    "\"InternalError\"}}  \n"
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"half\"";
	CU_ASSERT_EQUAL(feed_str(p, s, &got, msg, sizeof msg), 0);
	CU_ASSERT_STRING_EQUAL(got.data, "BOOKMARK - 9|ERROR 500 InternalError ServerError|");
	/* The incomplete line waits for its end. */
	CU_ASSERT_EQUAL(feed_str(p, "}}}\n", &got, msg, sizeof msg), 0);
	CU_ASSERT_STRING_EQUAL(got.data,
			       "BOOKMARK - 9|ERROR 500 InternalError ServerError|ADDED half -|");
	buf_release(&got);
	watch_parser_free(p);
}

static int stop_after_first(void *ctx, enum watch_event_type t, const cJSON *obj)
{
	(*(int *)ctx)++;
	return 1;
}

static void test_callback_stops(void)
{
	struct watch_parser *p = watch_parser_new(4096);
	int calls = 0;
	char msg[64];
	const char *s = "{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ADDED\",\"object\":{}}\n";
	CU_ASSERT_EQUAL(
	    watch_parser_feed(p, s, strlen(s), stop_after_first, &calls, msg, sizeof msg), 1);
	CU_ASSERT_EQUAL(calls, 1);
	watch_parser_free(p);
}

void register_kube_watch_tests(void)
{
	SBX_SUITE("kube/watch", { "split at every byte boundary", test_every_split },
		  { "byte at a time", test_byte_at_a_time }, { "oversized line", test_oversized_line },
		  { "malformed lines", test_malformed },
		  { "bookmark, error, blank lines", test_events_and_blank_lines },
		  { "callback stops the stream", test_callback_stops });
}
