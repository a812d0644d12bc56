/* libFuzzer target: the whole path of one Sandbox object through the
 * controller, as a tenant controls it: cache trim, spec validation, scope
 * digest and fingerprint, pod build (PVC and hostPath workspaces), seal and
 * verification, status. Invariants asserted:
 *  - a workspace is never mounted outside <root>/<namespace>/<owner>/ (hostPath)
 *    or <owner>/ of the namespace's PVC, and never without an owner;
 *  - JCS is idempotent on the spec: JCS(parse(JCS(spec))) == JCS(spec);
 *  - the controller verifies and adopts the pod it built itself;
 *  - trimmed cache copies stay bounded;
 *  - the words of a pod's status (sandbox/podstate.h) are the same from the
 *    pod and from its trimmed cache copy, bounded and terminated; a
 *    preparation pod's state too, from the preparation pods' cache copy;
 *  - the workspace preparation pod of the spec's owner mounts nothing outside
 *    that owner's folders either;
 *  - the NetworkPolicy probe's verdict from a pod is bounded and given only
 *    for a finished pod. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/config.h"
#include "sandbox/jcs.h"
#include "sandbox/podbuild.h"
#include "sandbox/podstate.h"
#include "sandbox/trim.h"
#include "sandbox/scope.h"
#include "sandbox/seal.h"
#include "sandbox/spec.h"
#include "sandbox/status.h"
#include "sandbox/verify.h"
#include "sandbox/netfloor.h"
#include "sandbox/netprobe.h"
#include "sandbox/wsprep.h"
#include "support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NS FUZZ_NS
#define UID "6f1c2a8e-0000-4000-8000-000000000001"
#define CLAIMED "2026-01-01T00:00:00Z"
#define TRIM_BOUND FUZZ_TRIM_BOUND

static void build_and_verify(const cJSON *spec, const struct sbx_scope *scope, const struct sbx_config *cfg)
{
	const char *owner = sbx_spec_owner(spec);
	char pod_name[80], seal[65];
	sbx_pod_name(scope, 0, pod_name, sizeof pod_name);
	assert(sbx_seal_compute(fuzz_seal_key, sizeof fuzz_seal_key, NS, pod_name, scope->digest, owner, scope->fingerprint, CLAIMED,
				seal) == 0);
	struct sbx_pod_params p = { NS, pod_name, "sbx", UID, spec, scope, CLAIMED, seal, cfg };
	cJSON *pod = sbx_pod_build(&p);
	if (!pod)
		return;
	fuzz_check_mounts(pod, cfg, owner);
	if (owner) {
		const struct sbx_wsprep_for sb = { "sandbox.dev/v1alpha1", "Sandbox", "sbx", UID };
		cJSON *prep = sbx_wsprep_pod(NS, owner, cfg, "img", &sb);
		assert(prep);
		fuzz_check_mounts(prep, cfg, owner);
		char why[512];
		assert(sbx_wsprep_state(prep, NS, owner, cfg, why, sizeof why) == SBX_WSPREP_WAITING);
		cJSON_Delete(prep);
	}
	struct sbx_verify_expect ex = { NS, owner, scope, fuzz_seal_keys(), 1 };
	assert(sbx_pod_verify(pod, &ex) == SBX_VERIFY_OK);
	struct sbx_certify cert = { pod, spec, cfg };
	char why[256];
	if (sbx_pod_payload_verify(pod, &cert, why, sizeof why) != SBX_VERIFY_OK) {
		fprintf(stderr, "the controller's own pod is not certified: %s\n", why);
		abort();
	}
	assert(sbx_pod_tamper_check(pod, &cert, why, sizeof why) == SBX_VERIFY_OK);
	cJSON *t = sbx_trim_pod(pod);
	assert(fuzz_printed_size(t) <= TRIM_BOUND);
	/* the cache's copy still passes the tamper check of bound pods, unless
	 * trimming marked it truncated (an image over the cache's 512 bytes, the
	 * CRD allows 1,024): then follow_bound reads the live pod, checked above */
	const cJSON *image = cJSON_GetObjectItemCaseSensitive(spec, "image");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "spec"), "truncated")))
		assert(cJSON_IsString(image) && strlen(image->valuestring) > 512);
	else
		assert(sbx_pod_tamper_check(t, &cert, why, sizeof why) == SBX_VERIFY_OK);
	cJSON_Delete(t);
	cJSON_Delete(pod);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct sbx_config *pvc, *host;
	fuzz_configs(&pvc, &host);
	cJSON *obj = cJSON_ParseWithLength((const char *)data, size);
	if (!obj)
		return 0;
	/* Whatever arrives is trimmed to a bounded copy, as a Sandbox and as a pod. */
	cJSON *ts = sbx_trim_sandbox(obj);
	assert(fuzz_printed_size(ts) <= TRIM_BOUND);
	cJSON *tp = sbx_trim_pod(obj);
	assert(fuzz_printed_size(tp) <= TRIM_BOUND);
	char why_raw[512], why_kept[512];
	sbx_pod_why(obj, SBX_CONTAINER, why_raw, sizeof why_raw);
	sbx_pod_why(tp, SBX_CONTAINER, why_kept, sizeof why_kept);
	assert(strlen(why_raw) < sizeof why_raw && !strcmp(why_raw, why_kept));
	char why[512], why_t[512];
	sbx_wsprep_state(obj, NS, "alice", pvc, why, sizeof why);
	assert(strlen(why) < sizeof why);
	/* The preparation pods' cache copy: bounded, and it means the same. */
	cJSON *tw = sbx_wsprep_trim(obj);
	assert(fuzz_printed_size(tw) <= 4096);
	enum sbx_wsprep_state ws = sbx_wsprep_state(obj, NS, "alice", pvc, why, sizeof why);
	assert(sbx_wsprep_state(tw, NS, "alice", pvc, why_t, sizeof why_t) == ws);
	assert(ws == SBX_WSPREP_FOREIGN || !strcmp(why, why_t)); /* a foreign one's name may be cut */
	cJSON_Delete(tw);
	/* The NetworkPolicy probe's client pod (sandbox/netprobe.h): a verdict
	 * only when done, words bounded; a floor policy's cache copy bounded. */
	int done = 0;
	enum sbx_netprobe_result nr = sbx_netprobe_verdict(obj, &done, why, sizeof why);
	assert(strlen(why) < sizeof why && (done || nr == SBX_NETPROBE_UNKNOWN));
	cJSON *tn = sbx_netfloor_trim(obj);
	assert(fuzz_printed_size(tn) <= SBX_NETFLOOR_SPEC_MAX + 2048);
	cJSON_Delete(tn);
	cJSON_Delete(tp);
	cJSON_Delete(obj);
	const cJSON *spec = cJSON_GetObjectItemCaseSensitive(ts, "spec");
	char msg[512];
	struct sbx_scope scope;
	if (!cJSON_IsObject(spec) || sbx_spec_validate(spec, msg, sizeof msg) < 0 ||
	    sbx_scope_compute(NS, UID, spec, &scope, msg, sizeof msg) < 0) {
		cJSON_Delete(ts);
		return 0;
	}
	char *a = jcs_string(spec);
	assert(a);
	cJSON *again = cJSON_Parse(a);
	assert(again);
	char *b = jcs_string(again);
	assert(b && !strcmp(a, b));
	free(a);
	free(b);
	cJSON_Delete(again);
	build_and_verify(spec, &scope, pvc);
	build_and_verify(spec, &scope, host);
	/* The status the reconcile writes for it. */
	char pod_name[80];
	sbx_pod_name(&scope, 3, pod_name, sizeof pod_name);
	struct sbx_status_in in = { .phase = "Running",
				    .pod_name = pod_name,
				    .pod_uid = "p-uid",
				    .scope_digest = scope.digest,
				    .fingerprint = scope.fingerprint,
				    .binding = "Created",
				    .claimed_at = CLAIMED,
				    .generation = 1,
				    .bound = 1,
				    .bound_reason = "PodCreated",
				    .bound_message = msg,
				    .ready = 1,
				    .ready_reason = "PodReady",
				    .ready_message = "ok" };
	cJSON *st = sbx_status_build(&in, cJSON_GetObjectItemCaseSensitive(ts, "status"), CLAIMED);
	assert(st && sbx_status_same(st, st));
	cJSON_Delete(st);
	cJSON_Delete(ts);
	return 0;
}
