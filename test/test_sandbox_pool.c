/* Unit tests for controller/sandbox/poolspec.c and the warm-bound pod's sealed
 * claim name (podbuild, seal, verify): what a warm pod is, who it can
 * serve, and how a scope's pod not named after its claim is told apart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "sandbox/claimrec.h"
#include "sandbox/config.h"
#include "sandbox/netprofile.h"
#include "sandbox/podbuild.h"
#include "sandbox/poolspec.h"
#include "sandbox/scope.h"
#include "sandbox/seal.h"
#include "sandbox/trim.h"
#include "sandbox/verify.h"
#include "test_suites.h"

void register_sandbox_pool_tests(void); /* called from test_sandbox_all.c */

#define POOL_UID "5d0c8a4e-2f0e-4d6b-9a53-0f6e3d2c1b10"
#define CREATED "2026-12-01T10:00:00Z"
#define WARM "sbx-w-bcdfghjklm"

static const char POOL[] = "{\"metadata\":{\"name\":\"agents\",\"namespace\":\"team-a\",\"uid\":\"" POOL_UID
			   "\",\"labels\":{\"x\":\"y\",\"" SBX_POOL_NS_INDEX "\":\"team-b\"}},"
			   "\"spec\":{\"replicas\":2,\"workspaceOwner\":\"alice\","
			   "\"template\":{\"image\":\"registry.local/agent:1.0\",\"command\":[\"sleep\",\"infinity\"]}}}";

struct pool_fixture {
	struct sbx_config cfg;
	struct sbx_seal_keys keys;
	cJSON *pool, *spec;
	char fp[65];
};

static void pool_init(struct pool_fixture *f)
{
	char err[256];
	memset(f, 0, sizeof *f);
	sbx_config_init(&f->cfg);
	sbx_seal_keys_init(&f->keys);
	CU_ASSERT_EQUAL_FATAL(sbx_seal_keys_add(&f->keys, (const unsigned char *)"0123456789abcdef0123456789abcdef", 32,
						16, err, sizeof err),
			      0);
	f->pool = cJSON_Parse(POOL);
	f->spec = sbx_pool_spec(f->pool);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f->spec);
	CU_ASSERT_EQUAL_FATAL(sbx_template_fingerprint(f->spec, f->fp), 0);
}

static void pool_release(struct pool_fixture *f)
{
	cJSON_Delete(f->pool);
	cJSON_Delete(f->spec);
	sbx_seal_keys_release(&f->keys);
	sbx_config_release(&f->cfg);
}

static const char *label_of(const cJSON *pod, const char *k)
{
	const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "labels"), k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *ann_of(const cJSON *pod, const char *k)
{
	const cJSON *v =
	    cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "annotations"), k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A Sandbox spec serves from a pool exactly when, without its key and
 * lifecycle, it is the template with the pool's owner. */
static void test_template_fingerprint(void)
{
	struct pool_fixture f;
	pool_init(&f);
	char fp[65];
	cJSON *s = cJSON_Parse("{\"image\":\"registry.local/agent:1.0\",\"command\":[\"sleep\",\"infinity\"],"
			       "\"workspaceOwner\":\"alice\",\"idempotencyKey\":\"task-1\","
			       "\"lifecycle\":{\"suspend\":false,\"shutdownTime\":\"2026-12-02T00:00:00Z\"}}");
	CU_ASSERT_EQUAL(sbx_template_fingerprint(s, fp), 0);
	CU_ASSERT_STRING_EQUAL(fp, f.fp);
	/* member order does not matter (RFC 8785) */
	cJSON *o = cJSON_Parse("{\"workspaceOwner\":\"alice\",\"command\":[\"sleep\",\"infinity\"],"
			       "\"image\":\"registry.local/agent:1.0\"}");
	CU_ASSERT_EQUAL(sbx_template_fingerprint(o, fp), 0);
	CU_ASSERT_STRING_EQUAL(fp, f.fp);
	cJSON_Delete(o);
	/* another owner, no owner, another argument: another template */
	const char *other[] = {
		"{\"image\":\"registry.local/agent:1.0\",\"command\":[\"sleep\",\"infinity\"],\"workspaceOwner\":\"bob\"}",
		"{\"image\":\"registry.local/agent:1.0\",\"command\":[\"sleep\",\"infinity\"]}",
		"{\"image\":\"registry.local/agent:1.0\",\"command\":[\"sleep\",\"1\"],\"workspaceOwner\":\"alice\"}",
	};
	for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
		o = cJSON_Parse(other[i]);
		CU_ASSERT_EQUAL(sbx_template_fingerprint(o, fp), 0);
		CU_ASSERT_STRING_NOT_EQUAL(fp, f.fp);
		cJSON_Delete(o);
	}
	CU_ASSERT_EQUAL(sbx_template_fingerprint(NULL, fp), -1);
	cJSON_Delete(s);
	pool_release(&f);
}

/* A warm pod is the pod a Sandbox of the template gets, but the pool's:
 * its label, the template's fingerprint, owned by the pool, sealed as a
 * member; and only a sealed member of that pool, template and owner counts. */
static void test_warm_pod_and_member(void)
{
	struct pool_fixture f;
	pool_init(&f);
	cJSON *pod = sbx_pool_pod_build(&f.cfg, &f.keys, "team-a", "agents", POOL_UID, WARM, f.spec, f.fp, CREATED);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pod);
	CU_ASSERT_STRING_EQUAL(label_of(pod, SBX_LABEL_POOL), POOL_UID);
	CU_ASSERT_PTR_NULL(label_of(pod, SBX_LABEL_DIGEST));
	CU_ASSERT_STRING_EQUAL(ann_of(pod, SBX_ANN_TEMPLATE_FP), f.fp);
	CU_ASSERT_PTR_NULL(ann_of(pod, SBX_ANN_FINGERPRINT));
	CU_ASSERT_STRING_EQUAL(ann_of(pod, SBX_ANN_OWNER), "alice");
	const cJSON *ref = cJSON_GetArrayItem(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "ownerReferences"), 0);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ref, "kind")->valuestring, SBX_POOL_KIND);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(ref, "uid")->valuestring, POOL_UID);
	/* the owner's subPaths from the start */
	const cJSON *mounts = cJSON_GetObjectItem(
	    cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "containers"), 0), "volumeMounts");
	CU_ASSERT_EQUAL(cJSON_GetArraySize(mounts), 4);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(cJSON_GetArrayItem(mounts, 0), "subPath")->valuestring,
			       "alice/workspace");

	CU_ASSERT_TRUE(sbx_pool_member(pod, &f.keys, POOL_UID, f.fp, "alice"));
	CU_ASSERT_FALSE(sbx_pool_member(pod, &f.keys, POOL_UID, f.fp, "bob"));
	CU_ASSERT_FALSE(sbx_pool_member(pod, &f.keys, POOL_UID, f.fp, NULL));
	CU_ASSERT_FALSE(sbx_pool_member(pod, &f.keys, "another-pool", f.fp, "alice"));
	char other_fp[65];
	memcpy(other_fp, f.fp, sizeof other_fp);
	other_fp[0] = other_fp[0] == '0' ? '1' : '0';
	CU_ASSERT_FALSE(sbx_pool_member(pod, &f.keys, POOL_UID, other_fp, "alice"));
	/* a copy under another name, with another owner, or relabelled to
	 * another pool no longer verifies */
	const struct {
		const char *map, *key, *value;
	} forged[] = {
		{ NULL, "name", "sbx-w-zzzzzzzzzz" },
		{ "annotations", SBX_ANN_OWNER, "bob" },
		{ "labels", SBX_LABEL_POOL, "another-pool" },
		{ "annotations", SBX_ANN_CLAIMED_AT, "2026-12-01T10:00:01Z" },
		{ "labels", SBX_LABEL_DIGEST, "a2c8db0f290b9f479603660ab6f7894e" },
		{ NULL, "deletionTimestamp", "2026-12-01T11:00:00Z" },
	};
	for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
		cJSON *x = cJSON_Duplicate(pod, 1);
		cJSON *m = cJSON_GetObjectItem(x, "metadata");
		cJSON *map = forged[i].map ? cJSON_GetObjectItem(m, forged[i].map) : m;
		cJSON_DeleteItemFromObject(map, forged[i].key);
		cJSON_AddStringToObject(map, forged[i].key, forged[i].value);
		const char *uid = !strcmp(forged[i].key, SBX_LABEL_POOL) ? "another-pool" : POOL_UID;
		const char *owner = !strcmp(forged[i].key, SBX_ANN_OWNER) ? "bob" : "alice";
		CU_ASSERT_FALSE(sbx_pool_member(x, &f.keys, uid, f.fp, owner));
		cJSON_Delete(x);
	}
	/* a warm pod never passes for a scope's pod */
	struct sbx_scope sc;
	char err[128];
	cJSON *s = cJSON_Parse("{\"image\":\"registry.local/agent:1.0\",\"command\":[\"sleep\",\"infinity\"],"
			       "\"workspaceOwner\":\"alice\",\"idempotencyKey\":\"k\"}");
	CU_ASSERT_EQUAL_FATAL(sbx_scope_compute("team-a", "uid-1", s, &sc, err, sizeof err), 0);
	struct sbx_verify_expect ex = { .ns = "team-a", .owner = "alice", .scope = &sc, .keys = &f.keys };
	CU_ASSERT_NOT_EQUAL(sbx_pod_verify(pod, &ex), SBX_VERIFY_OK);
	cJSON_Delete(s);
	cJSON_Delete(pod);
	pool_release(&f);
}

/* A warm pod bound to a scope names its claim, and the seal covers it. */
static void test_warm_bound_claim_sealed(void)
{
	struct pool_fixture f;
	pool_init(&f);
	struct sbx_scope sc;
	char err[128], seal[65], sealed[128], claim[80], other[80];
	cJSON *s = cJSON_Parse("{\"image\":\"registry.local/agent:1.0\",\"command\":[\"sleep\",\"infinity\"],"
			       "\"workspaceOwner\":\"alice\",\"idempotencyKey\":\"k\"}");
	CU_ASSERT_EQUAL_FATAL(sbx_scope_compute("team-a", "uid-1", s, &sc, err, sizeof err), 0);
	sbx_pod_name(&sc, 0, claim, sizeof claim);
	sbx_pod_name(&sc, 1, other, sizeof other);
	sbx_seal_pod_name(WARM, claim, sealed, sizeof sealed);
	CU_ASSERT_EQUAL(strncmp(sealed, WARM "=sbx-", strlen(WARM "=sbx-")), 0);
	CU_ASSERT_EQUAL_FATAL(sbx_seal_sign(&f.keys, "team-a", sealed, sc.digest, "alice", sc.fingerprint, CREATED, seal), 0);
	struct sbx_pod_params p = { .ns = "team-a", .pod_name = WARM, .sandbox_name = "s1", .sandbox_uid = "uid-1", .spec = s, .scope = &sc, .claimed_at = CREATED, .seal = seal, .cfg = &f.cfg, .claim = claim };
	cJSON *pod = sbx_pod_build(&p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pod);
	CU_ASSERT_STRING_EQUAL(ann_of(pod, SBX_ANN_CLAIM), claim);
	struct sbx_verify_expect ex = { .ns = "team-a", .owner = "alice", .scope = &sc, .keys = &f.keys, .check_fingerprint = 1 };
	CU_ASSERT_EQUAL(sbx_pod_verify(pod, &ex), SBX_VERIFY_OK);
	/* the claim moved to another generation: the seal no longer holds */
	cJSON *x = cJSON_Duplicate(pod, 1);
	cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(x, "metadata"), "annotations");
	cJSON_ReplaceItemInObject(ann, SBX_ANN_CLAIM, cJSON_CreateString(other));
	CU_ASSERT_EQUAL(sbx_pod_verify(x, &ex), SBX_VERIFY_BAD_SEAL);
	/* a claim of no generation of the digest: malformed */
	cJSON_ReplaceItemInObject(ann, SBX_ANN_CLAIM, cJSON_CreateString("sbx-00000000000000000000000000000000"));
	CU_ASSERT_EQUAL(sbx_pod_verify(x, &ex), SBX_VERIFY_MALFORMED);
	/* the claim dropped: the seal was over "name=claim", not the name */
	cJSON_DeleteItemFromObject(ann, SBX_ANN_CLAIM);
	CU_ASSERT_EQUAL(sbx_pod_verify(x, &ex), SBX_VERIFY_BAD_SEAL);
	cJSON_Delete(x);
	/* a pod named after its claim carries no claim annotation */
	p.pod_name = claim;
	cJSON *cold = sbx_pod_build(&p);
	CU_ASSERT_PTR_NULL(ann_of(cold, SBX_ANN_CLAIM));
	sbx_seal_pod_name(claim, claim, sealed, sizeof sealed);
	CU_ASSERT_STRING_EQUAL(sealed, claim);
	sbx_seal_pod_name(claim, NULL, sealed, sizeof sealed);
	CU_ASSERT_STRING_EQUAL(sealed, claim);
	cJSON_Delete(cold);
	/* claim names: generation 0 and n, nothing else */
	CU_ASSERT_EQUAL(sbx_claim_generation(claim, sc.digest), 0);
	CU_ASSERT_EQUAL(sbx_claim_generation(other, sc.digest), 1);
	CU_ASSERT_EQUAL(sbx_claim_generation(WARM, sc.digest), -1);
	char bad[96];
	snprintf(bad, sizeof bad, "%s-x", claim);
	CU_ASSERT_EQUAL(sbx_claim_generation(bad, sc.digest), -1);
	snprintf(bad, sizeof bad, "%s-", claim);
	CU_ASSERT_EQUAL(sbx_claim_generation(bad, sc.digest), -1);
	cJSON_Delete(pod);
	cJSON_Delete(s);
	pool_release(&f);
}

/* The cache keeps of a pool what the controller reads, indexed by its own
 * namespace (never a label its author set). */
static void test_pool_trim(void)
{
	cJSON *pool = cJSON_Parse(POOL);
	cJSON *t = sbx_pool_trim(pool);
	const cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(t, "metadata"), "labels");
	CU_ASSERT_EQUAL(cJSON_GetArraySize(labels), 1);
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItem(labels, SBX_POOL_NS_INDEX)->valuestring, "team-a");
	CU_ASSERT_PTR_NOT_NULL(cJSON_GetObjectItem(t, "spec"));
	cJSON_Delete(t);
	/* a spec beyond what the cache keeps is dropped: the pool is invalid */
	size_t n = SBX_SPEC_POOL_KEEP_MAX + 100;
	char *big = malloc(n + 1);
	memset(big, 'a', n);
	big[n] = '\0';
	cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(pool, "spec"), "template"), "x", big);
	t = sbx_pool_trim(pool);
	CU_ASSERT_PTR_NULL(cJSON_GetObjectItem(t, "spec"));
	CU_ASSERT_PTR_NULL(sbx_pool_spec(t));
	cJSON_Delete(t);
	free(big);
	cJSON_Delete(pool);
}

#define NETPOOL                                                                                                                                                                                                      \
	"{\"metadata\":{\"name\":\"web-pool\",\"namespace\":\"team-a\",\"uid\":\"" POOL_UID                                                                                                                          \
	"\",\"creationTimestamp\":\"" CREATED "\",\"annotations\":{\"" SBX_ANN_REQUESTED_BY "\":\"bob\",\"" SBX_ANN_AUTHZ_IDENTITY "\":\"{\\\"username\\\":\\\"bob\\\"}\"}},\"spec\":{\"replicas\":1,\"template\":{" \
	"\"image\":\"registry.local/agent:1.0\",\"network\":{\"profiles\":[\"web\",\"api\"]}}}}"

/* A pool whose template names allow profiles (issue 24 item 2): its warm
 * pods carry the set's label and names as a Sandbox's pod of that spec; the
 * profiles are part of the template fingerprint; its record verifies only
 * for its own name, set, template and author, and the cache keeps it. */
static void test_pool_profiles(void)
{
	struct pool_fixture f;
	pool_init(&f);
	const unsigned char *keys[] = { (const unsigned char *)"0123456789abcdef0123456789abcdef" };
	const size_t lens[] = { 32 };
	cJSON *pool = cJSON_Parse(NETPOOL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pool);
	cJSON *spec = sbx_pool_spec(pool);
	char fp[65], other[65], joined[SBX_PROFILES_JOINED_MAX], hash[17];
	CU_ASSERT_EQUAL_FATAL(sbx_template_fingerprint(spec, fp), 0);
	/* the warm pod: the set's label and names */
	cJSON *pod = sbx_pool_pod_build(&f.cfg, &f.keys, "team-a", "web-pool", POOL_UID, WARM, spec, fp, CREATED);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pod);
	const char *names[] = { "web", "api" };
	CU_ASSERT_EQUAL(sbx_profiles_set(names, 2, joined, hash), 0);
	CU_ASSERT_STRING_EQUAL(label_of(pod, SBX_LABEL_NETPROFILES), hash);
	CU_ASSERT_STRING_EQUAL(ann_of(pod, SBX_ANN_NETPROFILES), "api,web");
	CU_ASSERT_TRUE(sbx_pool_member(pod, &f.keys, POOL_UID, fp, NULL));
	/* the profiles are part of the template: without them, or another set, another fingerprint */
	cJSON *plain = cJSON_Parse("{\"image\":\"registry.local/agent:1.0\"}");
	CU_ASSERT_EQUAL(sbx_template_fingerprint(plain, other), 0);
	CU_ASSERT_STRING_NOT_EQUAL(other, fp);
	cJSON_AddItemToObject(plain, "network", cJSON_Parse("{\"profiles\":[\"web\"]}"));
	CU_ASSERT_EQUAL(sbx_template_fingerprint(plain, other), 0);
	CU_ASSERT_STRING_NOT_EQUAL(other, fp);
	cJSON_Delete(plain);
	/* a Sandbox of that template with a key: the same */
	cJSON *sbx = cJSON_Parse("{\"image\":\"registry.local/agent:1.0\",\"idempotencyKey\":\"k\","
				 "\"network\":{\"profiles\":[\"web\",\"api\"]}}");
	CU_ASSERT_EQUAL(sbx_template_fingerprint(sbx, other), 0);
	CU_ASSERT_STRING_EQUAL(other, fp);
	cJSON_Delete(sbx);
	/* no record: missing */
	size_t n = 0;
	char got[SBX_PROFILES_JOINED_MAX];
	CU_ASSERT_EQUAL(sbx_pool_profiles_verify(keys, lens, 1, pool, fp, got, &n, NULL), SBX_AUTHZ_MISSING);
	CU_ASSERT_EQUAL(n, 2);
	CU_ASSERT_STRING_EQUAL(got, "api,web");
	/* the webhook's record (sandbox_admission.c): verifies */
	char who[SBX_PROFILES_JOINED_MAX + 32], rec[SBX_AUTHZ_MAX];
	snprintf(who, sizeof who, SBX_NETPROFILE_AUTHZ_PREFIX "%s", joined);
	struct sbx_authz_subject s = { .ns = "team-a", .name = SBX_POOL_AUTHZ_PREFIX "web-pool", .owner = who, .fingerprint = fp, .username = "bob", .run = 1, .identity = "{\"username\":\"bob\"}" };
	CU_ASSERT_EQUAL_FATAL(sbx_authz_issue(keys[0], lens[0], &s, 1796119200, rec, sizeof rec), 0);
	cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(pool, "metadata"), "annotations");
	cJSON_AddStringToObject(ann, SBX_ANN_NET_AUTHZ, rec);
	struct sbx_authz_info info = { 0 };
	CU_ASSERT_EQUAL(sbx_pool_profiles_verify(keys, lens, 1, pool, fp, got, &n, &info), SBX_AUTHZ_OK);
	CU_ASSERT_TRUE(info.has_identity);
	/* the cache keeps it */
	cJSON *t = sbx_pool_trim(pool);
	CU_ASSERT_EQUAL(sbx_pool_profiles_verify(keys, lens, 1, t, fp, got, &n, NULL), SBX_AUTHZ_OK);
	cJSON_Delete(t);
	/* for another template fingerprint, another author, another set or a forged MAC: not */
	CU_ASSERT_EQUAL(sbx_pool_profiles_verify(keys, lens, 1, pool, f.fp, got, &n, NULL), SBX_AUTHZ_MISMATCH);
	cJSON_ReplaceItemInObject(ann, SBX_ANN_REQUESTED_BY, cJSON_CreateString("carol"));
	CU_ASSERT_EQUAL(sbx_pool_profiles_verify(keys, lens, 1, pool, fp, got, &n, NULL), SBX_AUTHZ_MISMATCH);
	cJSON_ReplaceItemInObject(ann, SBX_ANN_REQUESTED_BY, cJSON_CreateString("bob"));
	cJSON *tmpl = cJSON_GetObjectItem(cJSON_GetObjectItem(pool, "spec"), "template");
	cJSON_ReplaceItemInObject(tmpl, "network", cJSON_Parse("{\"profiles\":[\"web\"]}"));
	CU_ASSERT_EQUAL(sbx_pool_profiles_verify(keys, lens, 1, pool, fp, got, &n, NULL), SBX_AUTHZ_MISMATCH);
	cJSON_ReplaceItemInObject(tmpl, "network", cJSON_Parse("{\"profiles\":[\"web\",\"api\"]}"));
	char forged[SBX_AUTHZ_MAX];
	snprintf(forged, sizeof forged, "%s", rec);
	forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == '0' ? '1' : '0';
	cJSON_ReplaceItemInObject(ann, SBX_ANN_NET_AUTHZ, cJSON_CreateString(forged));
	CU_ASSERT_EQUAL(sbx_pool_profiles_verify(keys, lens, 1, pool, fp, got, &n, NULL), SBX_AUTHZ_MISMATCH);
	/* no profiles: nothing to verify */
	cJSON_DeleteItemFromObject(tmpl, "network");
	CU_ASSERT_EQUAL(sbx_pool_profiles_verify(keys, lens, 1, pool, fp, got, &n, NULL), SBX_AUTHZ_OK);
	CU_ASSERT_EQUAL(n, 0);
	cJSON_Delete(pod);
	cJSON_Delete(spec);
	cJSON_Delete(pool);
	pool_release(&f);
}

static void test_pool_pod_names(void)
{
	char a[32], b[32];
	CU_ASSERT_EQUAL(sbx_pool_pod_name(a), 0);
	CU_ASSERT_EQUAL(sbx_pool_pod_name(b), 0);
	CU_ASSERT_EQUAL(strlen(a), strlen(SBX_WARM_PREFIX) + 10);
	CU_ASSERT_EQUAL(strncmp(a, SBX_WARM_PREFIX, strlen(SBX_WARM_PREFIX)), 0);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
}

/* A warm pod whose pool's owner reference is gone (the pool deleted with
 * its dependents orphaned, or the reference removed) is an orphan: nothing
 * but the controller would ever delete it. A member, a taken pod, a pod of
 * another name and one already going are not. */
static void test_orphaned_warm_pod(void)
{
	struct pool_fixture f;
	pool_init(&f);
	cJSON *pod = sbx_pool_pod_build(&f.cfg, &f.keys, "team-a", "agents", POOL_UID, WARM, f.spec, f.fp, CREATED);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pod);
	CU_ASSERT_FALSE(sbx_pool_orphaned(pod));
	cJSON *md = cJSON_GetObjectItem(pod, "metadata");
	cJSON_DeleteItemFromObject(md, "ownerReferences");
	CU_ASSERT_TRUE(sbx_pool_orphaned(pod));
	cJSON_AddItemToObject(md, "ownerReferences", cJSON_CreateArray()); /* emptied */
	CU_ASSERT_TRUE(sbx_pool_orphaned(pod));
	cJSON *other = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"x\",\"uid\":\"u\"}");
	cJSON_AddItemToArray(cJSON_GetObjectItem(md, "ownerReferences"), other);
	CU_ASSERT_TRUE(sbx_pool_orphaned(pod)); /* no pool among its owners */
	cJSON_AddStringToObject(md, "deletionTimestamp", "2026-12-07T00:00:00Z");
	CU_ASSERT_FALSE(sbx_pool_orphaned(pod));
	cJSON_DeleteItemFromObject(md, "deletionTimestamp");
	cJSON_ReplaceItemInObject(md, "name", cJSON_CreateString("sbx-0123456789abcdef0123456789abcdef"));
	CU_ASSERT_FALSE(sbx_pool_orphaned(pod)); /* not a warm pod's name */
	cJSON_ReplaceItemInObject(md, "name", cJSON_CreateString(WARM));
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(md, "labels"), SBX_LABEL_POOL);
	CU_ASSERT_FALSE(sbx_pool_orphaned(pod)); /* taken: no pool's any more */
	CU_ASSERT_FALSE(sbx_pool_orphaned(NULL));
	cJSON_Delete(pod);
	pool_release(&f);
}

/* Removes metadata member k of pod. */
static void drop_meta(cJSON *pod, const char *k)
{
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItem(pod, "metadata"), k);
}

/* A sandbox pod whose Sandbox owner references are gone (the Sandbox
 * deleted with --cascade=orphan, or the references removed) is an orphan:
 * the garbage collector never takes it. A cold pod and a taken warm pod
 * alike, full or as the pod cache trims it. Not one a Sandbox still holds
 * (alive or gone: that is the garbage collector's), one going, a warm pool's
 * member (its pool's), nor any pod that does not verify as the
 * controller's (unsealed, sealed with another key, its labels changed). */
static void test_orphaned_sandbox_pod(void)
{
	struct pool_fixture f;
	pool_init(&f);
	struct sbx_scope sc;
	char err[128], seal[65], sealed[128], claim[80];
	cJSON *s = cJSON_Parse("{\"image\":\"registry.local/agent:1.0\",\"command\":[\"sleep\",\"infinity\"],"
			       "\"workspaceOwner\":\"alice\",\"idempotencyKey\":\"k\"}");
	CU_ASSERT_EQUAL_FATAL(sbx_scope_compute("team-a", "uid-1", s, &sc, err, sizeof err), 0);
	sbx_pod_name(&sc, 0, claim, sizeof claim);
	CU_ASSERT_EQUAL_FATAL(sbx_seal_sign(&f.keys, "team-a", claim, sc.digest, "alice", sc.fingerprint, CREATED, seal), 0);
	struct sbx_pod_params p = { .ns = "team-a", .pod_name = claim, .sandbox_name = "s1", .sandbox_uid = "uid-1", .spec = s, .scope = &sc, .claimed_at = CREATED, .seal = seal, .cfg = &f.cfg };
	cJSON *cold = sbx_pod_build(&p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cold);
	CU_ASSERT_FALSE(sbx_pod_orphaned(cold, &f.keys)); /* as created: its Sandbox holds it */
	cJSON *md = cJSON_GetObjectItem(cold, "metadata");
	/* another Sandbox, of any uid (one deleted: the garbage collector's) */
	cJSON *refs = cJSON_GetObjectItem(md, "ownerReferences");
	cJSON_ReplaceItemInObject(cJSON_GetArrayItem(refs, 0), "uid", cJSON_CreateString("uid-gone"));
	CU_ASSERT_FALSE(sbx_pod_orphaned(cold, &f.keys));
	drop_meta(cold, "ownerReferences");
	CU_ASSERT_TRUE(sbx_pod_orphaned(cold, &f.keys));
	cJSON *trimmed = sbx_trim_pod(cold);
	CU_ASSERT_TRUE(sbx_pod_orphaned(trimmed, &f.keys)); /* as the pod cache holds it */
	cJSON_Delete(trimmed);
	cJSON_AddItemToObject(md, "ownerReferences", cJSON_CreateArray()); /* emptied */
	CU_ASSERT_TRUE(sbx_pod_orphaned(cold, &f.keys));
	cJSON_AddItemToArray(cJSON_GetObjectItem(md, "ownerReferences"),
			     cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"x\",\"uid\":\"u\"}"));
	CU_ASSERT_TRUE(sbx_pod_orphaned(cold, &f.keys)); /* no Sandbox among its owners */
	cJSON_AddItemToArray(cJSON_GetObjectItem(md, "ownerReferences"),
			     cJSON_Parse("{\"apiVersion\":\"example.com/v1\",\"kind\":\"Sandbox\",\"name\":\"s1\",\"uid\":\"u\"}"));
	CU_ASSERT_TRUE(sbx_pod_orphaned(cold, &f.keys)); /* another group's Sandbox */
	cJSON_AddStringToObject(md, "deletionTimestamp", "2026-12-07T00:00:00Z");
	CU_ASSERT_FALSE(sbx_pod_orphaned(cold, &f.keys)); /* going */
	drop_meta(cold, "deletionTimestamp");
	/* not verified as the controller's: never touched */
	struct sbx_seal_keys other;
	sbx_seal_keys_init(&other);
	CU_ASSERT_EQUAL_FATAL(sbx_seal_keys_add(&other, (const unsigned char *)"fedcba9876543210fedcba9876543210", 32, 16,
						err, sizeof err),
			      0);
	CU_ASSERT_FALSE(sbx_pod_orphaned(cold, &other));
	CU_ASSERT_FALSE(sbx_pod_orphaned(cold, NULL));
	sbx_seal_keys_release(&other);
	cJSON *x = cJSON_Duplicate(cold, 1);
	cJSON *xl = cJSON_GetObjectItem(cJSON_GetObjectItem(x, "metadata"), "labels");
	cJSON_ReplaceItemInObject(xl, SBX_LABEL_DIGEST, cJSON_CreateString("0123456789abcdef0123456789abcdef"));
	CU_ASSERT_FALSE(sbx_pod_orphaned(x, &f.keys)); /* the seal is over another digest */
	cJSON_DeleteItemFromObject(xl, SBX_LABEL_DIGEST);
	CU_ASSERT_FALSE(sbx_pod_orphaned(x, &f.keys));
	cJSON_Delete(x);
	x = cJSON_Duplicate(cold, 1);
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(cJSON_GetObjectItem(x, "metadata"), "labels"),
				   "app.kubernetes.io/managed-by");
	CU_ASSERT_FALSE(sbx_pod_orphaned(x, &f.keys)); /* not managed by the controller */
	cJSON_Delete(x);
	x = cJSON_Duplicate(cold, 1);
	cJSON_DeleteItemFromObject(cJSON_GetObjectItem(cJSON_GetObjectItem(x, "metadata"), "annotations"), SBX_ANN_OWNER);
	CU_ASSERT_FALSE(sbx_pod_orphaned(x, &f.keys)); /* the seal names its owner */
	cJSON_Delete(x);
	/* a taken warm pod: named for the pool, claimed for the scope */
	sbx_seal_pod_name(WARM, claim, sealed, sizeof sealed);
	CU_ASSERT_EQUAL_FATAL(sbx_seal_sign(&f.keys, "team-a", sealed, sc.digest, "alice", sc.fingerprint, CREATED, seal), 0);
	p.pod_name = WARM;
	p.claim = claim;
	cJSON *taken = sbx_pod_build(&p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(taken);
	CU_ASSERT_FALSE(sbx_pod_orphaned(taken, &f.keys));
	drop_meta(taken, "ownerReferences");
	CU_ASSERT_TRUE(sbx_pod_orphaned(taken, &f.keys));
	cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(taken, "metadata"), "labels"), SBX_LABEL_POOL,
				POOL_UID);
	CU_ASSERT_FALSE(sbx_pod_orphaned(taken, &f.keys)); /* labelled a pool's: the pool's to judge */
	/* a pool's member without its pool: sbx_pool_orphaned's, not this */
	cJSON *member =
	    sbx_pool_pod_build(&f.cfg, &f.keys, "team-a", "agents", POOL_UID, WARM, f.spec, f.fp, CREATED);
	CU_ASSERT_PTR_NOT_NULL_FATAL(member);
	drop_meta(member, "ownerReferences");
	CU_ASSERT_TRUE(sbx_pool_orphaned(member));
	CU_ASSERT_FALSE(sbx_pod_orphaned(member, &f.keys));
	CU_ASSERT_FALSE(sbx_pod_orphaned(NULL, &f.keys));
	cJSON_Delete(member);
	cJSON_Delete(taken);
	cJSON_Delete(cold);
	cJSON_Delete(s);
	pool_release(&f);
}

void register_sandbox_pool_tests(void)
{
	SBX_SUITE("sandbox/pool", { "template fingerprint", test_template_fingerprint },
		  { "warm pods and who is a member", test_warm_pod_and_member },
		  { "a warm-bound pod's claim is sealed", test_warm_bound_claim_sealed },
		  { "the pool cache's trim", test_pool_trim }, { "warm pod names", test_pool_pod_names },
		  { "a pool naming network profiles: its pods, fingerprint and record", test_pool_profiles },
		  { "an orphaned warm pod", test_orphaned_warm_pod },
		  { "an orphaned sandbox pod", test_orphaned_sandbox_pod });
}
