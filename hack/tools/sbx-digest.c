/* sbx-digest: prints the scope digest and spec fingerprint of a Sandbox, the
 * public algorithm of contract section 3. Tests use it to play an attacker who
 * forges a pod under the exact expected name.
 *
 *   sbx-digest NAMESPACE UID SPEC_JSON   ->  "<scopeDigest> <specFingerprint>" */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sandbox/scope.h"

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: sbx-digest NAMESPACE UID SPEC_JSON\n");
		return 2;
	}
	cJSON *spec = cJSON_Parse(argv[3]);
	if (!cJSON_IsObject(spec)) {
		fprintf(stderr, "SPEC_JSON is not a JSON object\n");
		cJSON_Delete(spec);
		return 2;
	}
	struct sbx_scope s;
	char err[256];
	int rc = sbx_scope_compute(argv[1], argv[2], spec, &s, err, sizeof err);
	cJSON_Delete(spec);
	if (rc < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	printf("%s %s\n", s.digest, s.fingerprint);
	return 0;
}
