/* The watch stream parser: a watch answer is a sequence of JSON objects
 * {"type": ..., "object": ...}, one per '\n'-terminated line. Bytes are fed in
 * whatever chunks the network delivers; each complete line is parsed once.
 * Pure (no I/O), so it is tested byte by byte. */
#ifndef SBX_KUBE_WATCH_H
#define SBX_KUBE_WATCH_H

#include <stddef.h>

#include <cjson/cJSON.h>

enum watch_event_type { WATCH_ADDED,
			WATCH_MODIFIED,
			WATCH_DELETED,
			WATCH_BOOKMARK,
			WATCH_ERROR };

struct watch_parser;

/* Returns a new parser that refuses lines longer than max_line bytes (caller
 * frees with watch_parser_free). */
struct watch_parser *watch_parser_new(size_t max_line);
void watch_parser_free(struct watch_parser *p);
/* Returns "ADDED", "MODIFIED", ... (a static string). */
const char *watch_event_type_str(enum watch_event_type t);
/* Feeds n bytes and calls cb(ctx, type, object) for every complete event (the
 * object is borrowed for the call). Empty lines are skipped. Returns 0 when all
 * bytes were consumed; 1 when cb returned non-zero (the rest of the chunk is
 * dropped); -1 with a message in msg for an oversized line, a line that is not
 * JSON, or an event without a known type and an object. After 1 or -1 the
 * stream must be dropped (and, after -1, re-listed): the parser's state is
 * reset, not resumable. */
int watch_parser_feed(struct watch_parser *p, const char *data, size_t n,
		      int (*cb)(void *ctx, enum watch_event_type t, const cJSON *obj), void *ctx,
		      char *msg, size_t msglen);

#endif
