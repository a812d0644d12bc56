/* libFuzzer target: the watch stream framer (kube/watch.h). The first byte
 * picks the chunk size the bytes are fed in, so line splits at every offset
 * are explored. Invariants: a callback always gets an object; after 1 or -1
 * the parser is dropped (as the informer does). */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/watch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_event(void *ctx, enum watch_event_type t, const cJSON *obj)
{
	assert(obj != NULL);
	assert(watch_event_type_str(t) != NULL);
	(*(int *)ctx)++;
	return t == WATCH_ERROR; /* the informer ends the stream on ERROR */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t chunk = (size_t)data[0] % 64 + 1;
	data++;
	size--;
	struct watch_parser *p = watch_parser_new(4096);
	int events = 0;
	char msg[256];
	for (size_t off = 0; off < size; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;
		int rc = watch_parser_feed(p, (const char *)data + off, n, on_event, &events, msg, sizeof msg);
		assert(rc >= -1 && rc <= 1);
		if (rc != 0)
			break;
	}
	watch_parser_free(p);
	return 0;
}
