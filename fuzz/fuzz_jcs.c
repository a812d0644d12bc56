/* libFuzzer target: RFC 8785 canonicalization (sandbox/jcs.h). Invariant:
 * JCS is idempotent, JCS(parse(JCS(x))) == JCS(x), and its output is valid
 * UTF-8 JSON. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/jcs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *v = cJSON_ParseWithLength((const char *)data, size);
	if (!v)
		return 0;
	char *a = jcs_string(v);
	cJSON_Delete(v);
	if (!a)
		return 0;
	assert(jcs_utf8_valid(a, strlen(a)));
	cJSON *w = cJSON_Parse(a);
	assert(w != NULL);
	char *b = jcs_string(w);
	assert(b != NULL);
	assert(strcmp(a, b) == 0);
	cJSON_Delete(w);
	free(a);
	free(b);
	return 0;
}
