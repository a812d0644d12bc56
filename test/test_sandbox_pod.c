/* Unit tests for controller/sandbox/{seal,podbuild,verify}: the pod the
 * controller writes and the checks before it adopts one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "sandbox/config.h"
#include "sandbox/jcs.h"
#include "sandbox/podbuild.h"
#include "sandbox/trim.h"
#include "sandbox/scope.h"
#include "sandbox/seal.h"
#include "sandbox/verify.h"
#include "test_suites.h"

void register_sandbox_pod_tests(void); /* called from test_sandbox_all.c */

static const unsigned char KEY[] = "0123456789abcdef0123456789abcdef";
static const unsigned char OTHER_KEY[] = "fedcba9876543210fedcba9876543210";
#define KEYLEN 32
#define DIGEST "a2c8db0f290b9f479603660ab6f7894e"
#define FP "eb4def3af4273d4f3475fbf06eddf07e7a3de1237bde499fe9bd8e3077f3857f"
#define POD "sbx-" DIGEST
#define CLAIMED "2024-05-01T12:00:00Z"

static void test_seal_known_answer(void)
{
	char s[65];
	/* Pinned with an independent implementation (Python hmac) of the
	 * encoding in seal.h. */
	CU_ASSERT_EQUAL(
	    sbx_seal_compute(KEY, KEYLEN, "team-a", POD, DIGEST, "alice", FP, CLAIMED, s), 0);
	CU_ASSERT_STRING_EQUAL(s,
			       "4b910c58b89369f871ad61f17b9dd31b23c10f9449647cea833da1c8e270ce84");
	CU_ASSERT_EQUAL(sbx_seal_compute(KEY, KEYLEN, "team-a", POD, DIGEST, NULL, FP, CLAIMED, s),
			0);
	CU_ASSERT_STRING_EQUAL(s,
			       "b80bd6ee3cf925d9a2a4e810b282452d3aabdd2c833e6c329cf15454da952dcc");
}

static void test_seal_sensitivity(void)
{
	char base[65], again[65], s[9][65];
	CU_ASSERT_EQUAL_FATAL(
	    sbx_seal_compute(KEY, KEYLEN, "team-a", POD, DIGEST, "alice", FP, CLAIMED, base), 0);
	CU_ASSERT_EQUAL(
	    sbx_seal_compute(KEY, KEYLEN, "team-a", POD, DIGEST, "alice", FP, CLAIMED, again), 0);
	CU_ASSERT_STRING_EQUAL(base, again);
	CU_ASSERT_EQUAL(strlen(base), 64);
	int rc = 0;
	rc |=
	    sbx_seal_compute(OTHER_KEY, KEYLEN, "team-a", POD, DIGEST, "alice", FP, CLAIMED, s[0]);
	rc |= sbx_seal_compute(KEY, KEYLEN, "team-b", POD, DIGEST, "alice", FP, CLAIMED, s[1]);
	rc |= sbx_seal_compute(KEY, KEYLEN, "team-a", POD "-1", DIGEST, "alice", FP, CLAIMED, s[2]);
	rc |= sbx_seal_compute(KEY, KEYLEN, "team-a", POD, "b" DIGEST, "alice", FP, CLAIMED, s[3]);
	rc |= sbx_seal_compute(KEY, KEYLEN, "team-a", POD, DIGEST, "bob", FP, CLAIMED, s[4]);
	rc |= sbx_seal_compute(KEY, KEYLEN, "team-a", POD, DIGEST, NULL, FP, CLAIMED, s[5]);
	rc |= sbx_seal_compute(KEY, KEYLEN, "team-a", POD, DIGEST, "", FP, CLAIMED, s[6]);
	rc |= sbx_seal_compute(KEY, KEYLEN, "team-a", POD, DIGEST, "alice", "0" FP, CLAIMED, s[7]);
	rc |= sbx_seal_compute(KEY, KEYLEN, "team-a", POD, DIGEST, "alice", FP,
			       "2024-05-01T12:00:01Z", s[8]);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	for (int i = 0; i < 9; i++) {
		CU_ASSERT_STRING_NOT_EQUAL(s[i], base);
		for (int j = 0; j < i; j++)
			CU_ASSERT_STRING_NOT_EQUAL(s[i], s[j]);
	}
	/* Moving a byte between adjacent fields changes the seal. */
	CU_ASSERT_EQUAL(
	    sbx_seal_compute(KEY, KEYLEN, "team-ab", "c", DIGEST, NULL, FP, CLAIMED, s[0]), 0);
	CU_ASSERT_EQUAL(
	    sbx_seal_compute(KEY, KEYLEN, "team-a", "bc", DIGEST, NULL, FP, CLAIMED, s[1]), 0);
	CU_ASSERT_STRING_NOT_EQUAL(s[0], s[1]);
	/* Short keys and missing fields are refused. */
	CU_ASSERT_EQUAL(
	    sbx_seal_compute(KEY, SBX_SEAL_KEY_MIN - 1, "a", "b", "c", NULL, "d", "e", s[0]), -1);
	CU_ASSERT_STRING_EQUAL(s[0], "");
	CU_ASSERT_EQUAL(sbx_seal_compute(NULL, KEYLEN, "a", "b", "c", NULL, "d", "e", s[0]), -1);
	CU_ASSERT_EQUAL(sbx_seal_compute(KEY, KEYLEN, "a", "b", "c", NULL, NULL, "e", s[0]), -1);
	CU_ASSERT_EQUAL(sbx_seal_compute(KEY, KEYLEN, "a", "b", "c", NULL, "d", NULL, s[0]), -1);
}

static void test_seal_equal(void)
{
	char a[65];
	CU_ASSERT_EQUAL_FATAL(sbx_seal_compute(KEY, KEYLEN, "ns", "p", "d", NULL, "f", "c", a), 0);
	char b[65];
	memcpy(b, a, sizeof b);
	CU_ASSERT_EQUAL(sbx_seal_equal(a, b), 1);
	b[63] = b[63] == '0' ? '1' : '0';
	CU_ASSERT_EQUAL(sbx_seal_equal(a, b), 0);
	CU_ASSERT_EQUAL(sbx_seal_equal(a, NULL), 0);
	CU_ASSERT_EQUAL(sbx_seal_equal(NULL, a), 0);
	CU_ASSERT_EQUAL(sbx_seal_equal(NULL, NULL), 0);
	memcpy(b, a, sizeof b);
	b[10] = '\0';
	CU_ASSERT_EQUAL(sbx_seal_equal(b, b), 0);
	char longer[70];
	snprintf(longer, sizeof longer, "%s00", a);
	CU_ASSERT_EQUAL(sbx_seal_equal(longer, longer), 0);
	char upper[65] = "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789";
	CU_ASSERT_EQUAL(sbx_seal_equal(upper, upper), 0);
}

/* A Sandbox with its scope, and the pod the controller would create for it. */
struct fixture {
	cJSON *spec;
	struct sbx_scope scope;
	struct sbx_config cfg;
	char pod_name[64];
	char seal[65];
	const char *owner;
	cJSON *pod;
};

static const char ALICE_SPEC[] =
    "{\"image\":\"registry.local/agent:1.0\",\"command\":[\"sh\",\"-c\"],\"args\":[\"run\"],"
    "\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"valueFrom\":{\"secretKeyRef\":{}}}"
    "],"
    "\"idempotencyKey\":\"task-42\",\"workspaceOwner\":\"alice\",\"runtimeClassName\":\"gvisor\","
    "\"labels\":{\"sandbox.dev/seal\":\"user\"},\"annotations\":{\"sandbox.dev/"
    "workspace-owner\":\"bob\"}}";

static const char ANON_SPEC[] =
    "{\"image\":\"registry.local/agent:1.0\",\"idempotencyKey\":\"task-42\","
    "\"resources\":{\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}}";

/* Builds fixture f for spec_json under config yaml (NULL = defaults). */
static void fixture_init(struct fixture *f, const char *spec_json, const char *yaml)
{
	char err[256];
	memset(f, 0, sizeof *f);
	f->spec = cJSON_Parse(spec_json);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f->spec);
	sbx_config_init(&f->cfg);
	static const char base[] = "pod: {runtimeClasses: {allowed: [gvisor, kata]}}\n";
	CU_ASSERT_EQUAL_FATAL(sbx_config_parse(&f->cfg, base, strlen(base), err, sizeof err), 0);
	if (yaml)
		CU_ASSERT_EQUAL_FATAL(
		    sbx_config_parse(&f->cfg, yaml, strlen(yaml), err, sizeof err), 0);
	CU_ASSERT_EQUAL_FATAL(
	    sbx_scope_compute("team-a", "uid-1", f->spec, &f->scope, err, sizeof err), 0);
	sbx_pod_name(&f->scope, 0, f->pod_name, sizeof f->pod_name);
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(f->spec, "workspaceOwner");
	f->owner = cJSON_IsString(o) ? o->valuestring : NULL;
	CU_ASSERT_EQUAL_FATAL(sbx_seal_compute(KEY, KEYLEN, "team-a", f->pod_name, f->scope.digest,
					       f->owner, f->scope.fingerprint, CLAIMED, f->seal),
			      0);
	struct sbx_pod_params p = {
		.ns = "team-a",
		.pod_name = f->pod_name,
		.sandbox_name = "sb-1",
		.sandbox_uid = "uid-1",
		.spec = f->spec,
		.scope = &f->scope,
		.claimed_at = CLAIMED,
		.seal = f->seal,
		.cfg = &f->cfg,
	};
	f->pod = sbx_pod_build(&p);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f->pod);
}

static void fixture_release(struct fixture *f)
{
	cJSON_Delete(f->pod);
	cJSON_Delete(f->spec);
	sbx_config_release(&f->cfg);
}

/* Follows a path of object members and array indexes ("spec", "volumes", "0"). */
static const cJSON *at(const cJSON *v, const char *const *path)
{
	for (; v && *path; path++) {
		if (cJSON_IsArray(v))
			v = cJSON_GetArrayItem(v, atoi(*path));
		else
			v = cJSON_GetObjectItemCaseSensitive(v, *path);
	}
	return v;
}

#define AT(v, ...) at((v), (const char *const[]){ __VA_ARGS__, NULL })

static const char *str_at(const cJSON *v)
{
	return cJSON_IsString(v) ? v->valuestring : "<not a string>";
}

static void assert_common_metadata(const struct fixture *f)
{
	const cJSON *md = AT(f->pod, "metadata");
	CU_ASSERT_STRING_EQUAL(str_at(AT(f->pod, "apiVersion")), "v1");
	CU_ASSERT_STRING_EQUAL(str_at(AT(f->pod, "kind")), "Pod");
	CU_ASSERT_STRING_EQUAL(str_at(AT(md, "name")), f->pod_name);
	CU_ASSERT_STRING_EQUAL(str_at(AT(md, "namespace")), "team-a");
	const cJSON *labels = AT(md, "labels");
	CU_ASSERT_EQUAL(cJSON_GetArraySize(labels), 3);
	CU_ASSERT_STRING_EQUAL(str_at(AT(labels, "sandbox.dev/scope-digest")), f->scope.digest);
	CU_ASSERT_STRING_EQUAL(str_at(AT(labels, "app.kubernetes.io/managed-by")),
			       "sandbox-controller");
	CU_ASSERT_STRING_EQUAL(str_at(AT(labels, "app.kubernetes.io/name")), "sandbox");
	const cJSON *ann = AT(md, "annotations");
	CU_ASSERT_EQUAL(cJSON_GetArraySize(ann), f->owner ? 4 : 3);
	CU_ASSERT_STRING_EQUAL(str_at(AT(ann, "sandbox.dev/spec-fingerprint")),
			       f->scope.fingerprint);
	CU_ASSERT_STRING_EQUAL(str_at(AT(ann, "sandbox.dev/claimed-at")), CLAIMED);
	CU_ASSERT_STRING_EQUAL(str_at(AT(ann, "sandbox.dev/seal")), f->seal);
	if (f->owner) {
		CU_ASSERT_STRING_EQUAL(str_at(AT(ann, "sandbox.dev/workspace-owner")), f->owner);
	} else {
		CU_ASSERT_PTR_NULL(AT(ann, "sandbox.dev/workspace-owner"));
	}
	const cJSON *refs = AT(md, "ownerReferences");
	CU_ASSERT_EQUAL(cJSON_GetArraySize(refs), 1);
	CU_ASSERT_STRING_EQUAL(str_at(AT(refs, "0", "apiVersion")), "sandbox.dev/v1alpha1");
	CU_ASSERT_STRING_EQUAL(str_at(AT(refs, "0", "kind")), "Sandbox");
	CU_ASSERT_STRING_EQUAL(str_at(AT(refs, "0", "name")), "sb-1");
	CU_ASSERT_STRING_EQUAL(str_at(AT(refs, "0", "uid")), "uid-1");
	CU_ASSERT(cJSON_IsTrue(AT(refs, "0", "controller")));
	CU_ASSERT(cJSON_IsTrue(AT(refs, "0", "blockOwnerDeletion")));
	CU_ASSERT_STRING_EQUAL(str_at(AT(f->pod, "spec", "restartPolicy")), "Never");
	CU_ASSERT(cJSON_IsFalse(AT(f->pod, "spec", "automountServiceAccountToken")));
	CU_ASSERT_EQUAL(cJSON_GetArraySize(AT(f->pod, "spec", "containers")), 1);
	CU_ASSERT_STRING_EQUAL(str_at(AT(f->pod, "spec", "containers", "0", "name")), "sandbox");
	CU_ASSERT_STRING_EQUAL(str_at(AT(f->pod, "spec", "containers", "0", "image")),
			       "registry.local/agent:1.0");
}

/* Returns the canonical JSON of v (caller frees), to look for whole words. */
static char *dump(const cJSON *v)
{
	char *s = jcs_string(v);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	return s;
}

static void test_pod_pvc(void)
{
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, NULL);
	assert_common_metadata(&f);
	const cJSON *c = AT(f.pod, "spec", "containers", "0");
	CU_ASSERT_STRING_EQUAL(str_at(AT(c, "command", "1")), "-c");
	CU_ASSERT_STRING_EQUAL(str_at(AT(c, "args", "0")), "run");
	CU_ASSERT_STRING_EQUAL(str_at(AT(f.pod, "spec", "runtimeClassName")), "gvisor");
	char *env = dump(AT(c, "env"));
	CU_ASSERT_STRING_EQUAL(env, "[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\"}]");
	free(env);
	char *res = dump(AT(c, "resources"));
	CU_ASSERT_STRING_EQUAL(res, "{\"limits\":{\"cpu\":\"2\",\"memory\":\"4Gi\"},"
				    "\"requests\":{\"cpu\":\"2\",\"memory\":\"4Gi\"}}");
	free(res);

	const cJSON *vols = AT(f.pod, "spec", "volumes");
	CU_ASSERT_EQUAL(cJSON_GetArraySize(vols), 1);
	CU_ASSERT_STRING_EQUAL(str_at(AT(vols, "0", "name")), "workspaces");
	CU_ASSERT_STRING_EQUAL(str_at(AT(vols, "0", "persistentVolumeClaim", "claimName")),
			       "sandbox-workspaces");
	const cJSON *vm = AT(c, "volumeMounts");
	CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(vm), 4);
	static const char *const sub[] = { "alice/workspace", "alice/claude", "alice/codex",
					   "alice/gemini" };
	static const char *const path[] = { "/workspace", "/home/agent/.claude",
					    "/home/agent/.codex", "/home/agent/.gemini" };
	for (int i = 0; i < 4; i++) {
		const cJSON *m = cJSON_GetArrayItem(vm, i);
		CU_ASSERT_STRING_EQUAL(str_at(AT(m, "name")), "workspaces");
		CU_ASSERT_STRING_EQUAL(str_at(AT(m, "subPath")), sub[i]);
		CU_ASSERT_STRING_EQUAL(str_at(AT(m, "mountPath")), path[i]);
	}
	/* The spec's own "labels"/"annotations" members went nowhere. */
	char *all = dump(f.pod);
	CU_ASSERT_PTR_NULL(strstr(all, "\"user\""));
	CU_ASSERT_PTR_NULL(strstr(all, "\"bob\""));
	CU_ASSERT_PTR_NULL(strstr(all, "valueFrom"));
	free(all);
	fixture_release(&f);
}

static void test_pod_hostpath(void)
{
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, "workspace: {mode: hostPath, hostPathRoot: /srv/ws}\n");
	assert_common_metadata(&f);
	const cJSON *vols = AT(f.pod, "spec", "volumes");
	const cJSON *vm = AT(f.pod, "spec", "containers", "0", "volumeMounts");
	CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(vols), 4);
	CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(vm), 4);
	static const char *const host[] = { "/srv/ws/team-a/alice/workspace", "/srv/ws/team-a/alice/claude",
					    "/srv/ws/team-a/alice/codex", "/srv/ws/team-a/alice/gemini" };
	for (int i = 0; i < 4; i++) {
		char name[16];
		snprintf(name, sizeof name, "ws-%d", i);
		const cJSON *v = cJSON_GetArrayItem(vols, i), *m = cJSON_GetArrayItem(vm, i);
		CU_ASSERT_STRING_EQUAL(str_at(AT(v, "name")), name);
		CU_ASSERT_STRING_EQUAL(str_at(AT(v, "hostPath", "path")), host[i]);
		CU_ASSERT_STRING_EQUAL(str_at(AT(v, "hostPath", "type")), "DirectoryOrCreate");
		CU_ASSERT_STRING_EQUAL(str_at(AT(m, "name")), name);
		CU_ASSERT_PTR_NULL(AT(m, "subPath"));
	}
	char *all = dump(f.pod);
	CU_ASSERT_PTR_NULL(strstr(all, "persistentVolumeClaim"));
	free(all);
	fixture_release(&f);
}

static void test_pod_no_owner(void)
{
	static const char *const cfgs[] = { NULL,
					    "workspace: {mode: hostPath, hostPathRoot: /srv/ws}\n" };
	for (size_t k = 0; k < 2; k++) {
		struct fixture f;
		fixture_init(&f, ANON_SPEC, cfgs[k]);
		assert_common_metadata(&f);
		const cJSON *vols = AT(f.pod, "spec", "volumes");
		const cJSON *vm = AT(f.pod, "spec", "containers", "0", "volumeMounts");
		CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(vols), 4);
		CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(vm), 4);
		static const char *const path[] = { "/workspace", "/home/agent/.claude",
						    "/home/agent/.codex", "/home/agent/.gemini" };
		for (int i = 0; i < 4; i++) {
			char name[16];
			snprintf(name, sizeof name, "ws-%d", i);
			const cJSON *v = cJSON_GetArrayItem(vols, i),
				    *m = cJSON_GetArrayItem(vm, i);
			CU_ASSERT(cJSON_IsObject(AT(v, "emptyDir")));
			CU_ASSERT_EQUAL(cJSON_GetArraySize(v), 2);
			CU_ASSERT_STRING_EQUAL(str_at(AT(v, "name")), name);
			CU_ASSERT_STRING_EQUAL(str_at(AT(m, "name")), name);
			CU_ASSERT_STRING_EQUAL(str_at(AT(m, "mountPath")), path[i]);
		}
		char *all = dump(f.pod);
		CU_ASSERT_PTR_NULL(strstr(all, "persistentVolumeClaim"));
		CU_ASSERT_PTR_NULL(strstr(all, "hostPath"));
		CU_ASSERT_PTR_NULL(strstr(all, "subPath"));
		CU_ASSERT_PTR_NULL(strstr(all, "workspace-owner"));
		CU_ASSERT_PTR_NULL(strstr(all, "runtimeClassName"));
		free(all);
		/* spec.resources is copied as given. */
		char *res = dump(AT(f.pod, "spec", "containers", "0", "resources"));
		CU_ASSERT_STRING_EQUAL(res, "{\"limits\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}");
		free(res);
		fixture_release(&f);
	}
}

static void test_pod_refusals(void)
{
	struct sbx_config cfg;
	struct sbx_scope sc = { .digest = DIGEST, .fingerprint = FP };
	sbx_config_init(&cfg);
	static const char *const bad[] = {
		"{\"image\":\"i\",\"workspaceOwner\":\"\"}",
		"{\"image\":\"i\",\"workspaceOwner\":\"../x\"}",
		"{\"image\":\"i\",\"workspaceOwner\":7}",
		"{\"image\":\"\"}",
		"{\"command\":[\"sh\"]}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cJSON *spec = cJSON_Parse(bad[i]);
		struct sbx_pod_params p = { "ns", POD, "sb", "uid", spec, &sc, CLAIMED, FP, &cfg, NULL };
		CU_ASSERT_PTR_NULL(sbx_pod_build(&p));
		cJSON_Delete(spec);
	}
	cJSON *spec = cJSON_Parse("{\"image\":\"i\",\"workspaceOwner\":\"alice\"}");
	struct sbx_pod_params p = { "ns", POD, "sb", "uid", spec, &sc, CLAIMED, FP, &cfg, NULL };
	cJSON *ok = sbx_pod_build(&p);
	CU_ASSERT_PTR_NOT_NULL(ok);
	cJSON_Delete(ok);
	p.seal = NULL;
	CU_ASSERT_PTR_NULL(sbx_pod_build(&p));
	p.seal = FP;
	/* hostPath mode without a root, or an unsafe subdir, is refused. */
	cfg.ws_mode = SBX_WS_HOSTPATH;
	CU_ASSERT_PTR_NULL(sbx_pod_build(&p));
	cfg.ws_mode = SBX_WS_PVC;
	free(cfg.mounts[0].subdir);
	cfg.mounts[0].subdir = strdup("..");
	CU_ASSERT_PTR_NULL(sbx_pod_build(&p));
	cJSON_Delete(spec);
	sbx_config_release(&cfg);
	CU_ASSERT_PTR_NULL(sbx_pod_build(NULL));
}

/* Sets (or with val NULL removes) metadata.<section>.<k> of pod. */
static void set_meta(cJSON *pod, const char *section, const char *k, const char *val)
{
	cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
	cJSON *s = section ? cJSON_GetObjectItemCaseSensitive(md, section) : md;
	cJSON_DeleteItemFromObjectCaseSensitive(s, k);
	if (val)
		cJSON_AddStringToObject(s, k, val);
}

static void reseal(cJSON *pod, const unsigned char *key)
{
	const cJSON *md = AT(pod, "metadata");
	const cJSON *ow = AT(md, "annotations", SBX_ANN_OWNER);
	char s[65];
	CU_ASSERT_EQUAL_FATAL(
	    sbx_seal_compute(key, KEYLEN, str_at(AT(md, "namespace")), str_at(AT(md, "name")),
			     str_at(AT(md, "labels", SBX_LABEL_DIGEST)), ow ? str_at(ow) : NULL,
			     str_at(AT(md, "annotations", SBX_ANN_FINGERPRINT)),
			     str_at(AT(md, "annotations", SBX_ANN_CLAIMED_AT)), s),
	    0);
	set_meta(pod, "annotations", SBX_ANN_SEAL, s);
}

/* The controller's key list in these tests: KEY only. */
static const struct sbx_seal_keys *keyring(void)
{
	static struct sbx_seal_keys k;
	if (!k.n) {
		char err[128];
		CU_ASSERT_EQUAL_FATAL(sbx_seal_keys_add(&k, KEY, KEYLEN, 0, err, sizeof err), 0);
	}
	return &k;
}

static struct sbx_verify_expect expect_of(const struct fixture *f)
{
	struct sbx_verify_expect e = { "team-a", f->owner, &f->scope, keyring(), 1 };
	return e;
}

/* Applies one tampering to a fresh copy of f's pod and checks the verdict. */
static void check_tamper(const struct fixture *f, const char *section, const char *k,
			 const char *val, int resign, enum sbx_verify want)
{
	cJSON *pod = cJSON_Duplicate(f->pod, 1);
	struct sbx_verify_expect e = expect_of(f);
	set_meta(pod, section, k, val);
	if (resign)
		reseal(pod, KEY);
	enum sbx_verify got = sbx_pod_verify(pod, &e);
	if (got != want)
		fprintf(stderr, "\n  tamper %s.%s=%s: got %s, want %s\n",
			section ? section : "metadata", k, val ? val : "(removed)",
			sbx_verify_str(got), sbx_verify_str(want));
	CU_ASSERT_EQUAL(got, want);
	cJSON_Delete(pod);
}

static void test_verify_genuine(void)
{
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, NULL);
	struct sbx_verify_expect e = expect_of(&f);
	CU_ASSERT_EQUAL(sbx_pod_verify(f.pod, &e), SBX_VERIFY_OK);
	/* A pod round-tripped through JSON text still verifies. */
	char *text = cJSON_PrintUnformatted(f.pod);
	cJSON *back = cJSON_Parse(text);
	CU_ASSERT_EQUAL(sbx_pod_verify(back, &e), SBX_VERIFY_OK);
	cJSON_Delete(back);
	free(text);
	fixture_release(&f);

	fixture_init(&f, ANON_SPEC, NULL);
	e = expect_of(&f);
	CU_ASSERT_EQUAL(sbx_pod_verify(f.pod, &e), SBX_VERIFY_OK);
	fixture_release(&f);
}

static void test_verify_tampering(void)
{
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, NULL);
	check_tamper(&f, NULL, "namespace", "team-b", 0, SBX_VERIFY_NAMESPACE_MISMATCH);
	check_tamper(&f, NULL, "namespace", NULL, 0, SBX_VERIFY_NAMESPACE_MISMATCH);
	check_tamper(&f, "labels", SBX_LABEL_MANAGED_BY, "someone-else", 0, SBX_VERIFY_NOT_MANAGED);
	check_tamper(&f, "labels", SBX_LABEL_MANAGED_BY, NULL, 0, SBX_VERIFY_NOT_MANAGED);
	check_tamper(&f, "labels", SBX_LABEL_NAME, "sandboxx", 0, SBX_VERIFY_NOT_MANAGED);
	check_tamper(&f, "labels", SBX_LABEL_DIGEST, "00000000000000000000000000000000", 0,
		     SBX_VERIFY_DIGEST_MISMATCH);
	check_tamper(&f, "labels", SBX_LABEL_DIGEST, NULL, 0, SBX_VERIFY_DIGEST_MISMATCH);
	check_tamper(&f, "annotations", SBX_ANN_OWNER, "bob", 0, SBX_VERIFY_OWNER_MISMATCH);
	check_tamper(&f, "annotations", SBX_ANN_OWNER, "alice ", 0, SBX_VERIFY_OWNER_MISMATCH);
	check_tamper(&f, "annotations", SBX_ANN_OWNER, NULL, 0, SBX_VERIFY_OWNER_MISMATCH);
	check_tamper(&f, "annotations", SBX_ANN_SEAL, NULL, 0, SBX_VERIFY_BAD_SEAL);
	check_tamper(&f, "annotations", SBX_ANN_SEAL, "not-hex", 0, SBX_VERIFY_BAD_SEAL);
	char flipped[65];
	memcpy(flipped, f.seal, sizeof flipped);
	flipped[0] = flipped[0] == 'a' ? 'b' : 'a';
	check_tamper(&f, "annotations", SBX_ANN_SEAL, flipped, 0, SBX_VERIFY_BAD_SEAL);
	check_tamper(&f, "annotations", SBX_ANN_CLAIMED_AT, "2030-01-01T00:00:00Z", 0,
		     SBX_VERIFY_BAD_SEAL);
	check_tamper(&f, NULL, "name", "sbx-other", 0, SBX_VERIFY_BAD_SEAL);
	check_tamper(&f, "annotations", SBX_ANN_FINGERPRINT, "0000", 0, SBX_VERIFY_BAD_SEAL);
	check_tamper(&f, "annotations", SBX_ANN_CLAIMED_AT, NULL, 0, SBX_VERIFY_MALFORMED);
	check_tamper(&f, "annotations", SBX_ANN_FINGERPRINT, NULL, 0, SBX_VERIFY_MALFORMED);
	check_tamper(&f, NULL, "name", NULL, 0, SBX_VERIFY_MALFORMED);
	check_tamper(&f, NULL, "annotations", NULL, 0, SBX_VERIFY_MALFORMED);
	check_tamper(&f, NULL, "labels", NULL, 0, SBX_VERIFY_NOT_MANAGED);
	check_tamper(&f, NULL, "deletionTimestamp", "2024-05-01T13:00:00Z", 0,
		     SBX_VERIFY_TERMINATING);
	/* A genuine pod of the scope for another spec (the seal covers the
	 * fingerprint, so only the controller could have written it). */
	check_tamper(&f, "annotations", SBX_ANN_FINGERPRINT, "1111", 1,
		     SBX_VERIFY_FINGERPRINT_MISMATCH);

	struct sbx_verify_expect e = expect_of(&f);
	CU_ASSERT_EQUAL(sbx_pod_verify(NULL, &e), SBX_VERIFY_MALFORMED);
	cJSON *arr = cJSON_CreateArray();
	CU_ASSERT_EQUAL(sbx_pod_verify(arr, &e), SBX_VERIFY_MALFORMED);
	cJSON_Delete(arr);
	cJSON *nometa = cJSON_Duplicate(f.pod, 1);
	cJSON_DeleteItemFromObjectCaseSensitive(nometa, "metadata");
	CU_ASSERT_EQUAL(sbx_pod_verify(nometa, &e), SBX_VERIFY_MALFORMED);
	cJSON_Delete(nometa);
	/* Without the key nothing verifies. */
	e.keys = NULL;
	CU_ASSERT_EQUAL(sbx_pod_verify(f.pod, &e), SBX_VERIFY_BAD_SEAL);
	fixture_release(&f);
}

static void test_verify_fingerprint_modes(void)
{
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, NULL);
	cJSON *other = cJSON_Duplicate(f.pod, 1);
	set_meta(other, "annotations", SBX_ANN_FINGERPRINT,
		 "2222222222222222222222222222222222222222222222222222222222222222");
	reseal(other, KEY);
	struct sbx_verify_expect e = expect_of(&f);
	CU_ASSERT_EQUAL(sbx_pod_verify(other, &e), SBX_VERIFY_FINGERPRINT_MISMATCH);
	e.check_fingerprint = 0;
	CU_ASSERT_EQUAL(sbx_pod_verify(other, &e), SBX_VERIFY_OK);
	/* Order: terminating is reported before the fingerprint... */
	set_meta(other, NULL, "deletionTimestamp", "2024-05-01T13:00:00Z");
	e.check_fingerprint = 1;
	CU_ASSERT_EQUAL(sbx_pod_verify(other, &e), SBX_VERIFY_TERMINATING);
	cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(other, "metadata"),
						"deletionTimestamp");
	/* ...and a bad seal before either. */
	reseal(other, OTHER_KEY);
	CU_ASSERT_EQUAL(sbx_pod_verify(other, &e), SBX_VERIFY_BAD_SEAL);
	e.check_fingerprint = 0;
	CU_ASSERT_EQUAL(sbx_pod_verify(other, &e), SBX_VERIFY_BAD_SEAL);
	cJSON_Delete(other);
	/* A null deletionTimestamp is not terminating. */
	cJSON *live = cJSON_Duplicate(f.pod, 1);
	cJSON_AddNullToObject(cJSON_GetObjectItemCaseSensitive(live, "metadata"),
			      "deletionTimestamp");
	e.check_fingerprint = 1;
	CU_ASSERT_EQUAL(sbx_pod_verify(live, &e), SBX_VERIFY_OK);
	cJSON_Delete(live);
	fixture_release(&f);
}

static void test_verify_forged(void)
{
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, NULL);
	/* A pod built by someone else: every label and annotation copied from
	 * the genuine pod, sealed with a key that is not the controller's. */
	cJSON *forged = cJSON_Duplicate(f.pod, 1);
	reseal(forged, OTHER_KEY);
	struct sbx_verify_expect e = expect_of(&f);
	CU_ASSERT_EQUAL(sbx_pod_verify(forged, &e), SBX_VERIFY_BAD_SEAL);
	e.check_fingerprint = 0;
	CU_ASSERT_EQUAL(sbx_pod_verify(forged, &e), SBX_VERIFY_BAD_SEAL);
	cJSON_Delete(forged);
	/* A copy of the genuine seal onto a pod under another name. */
	forged = cJSON_Duplicate(f.pod, 1);
	set_meta(forged, NULL, "name", POD "-1");
	CU_ASSERT_EQUAL(sbx_pod_verify(forged, &e), SBX_VERIFY_BAD_SEAL);
	cJSON_Delete(forged);
	fixture_release(&f);
}

static void test_verify_owner_presence(void)
{
	struct fixture anon, alice;
	fixture_init(&anon, ANON_SPEC, NULL);
	fixture_init(&alice, ALICE_SPEC, NULL);
	/* Pod without owner: only "no owner" matches, not "" nor "alice". */
	struct sbx_verify_expect e = expect_of(&anon);
	CU_ASSERT_EQUAL(sbx_pod_verify(anon.pod, &e), SBX_VERIFY_OK);
	e.owner = "";
	CU_ASSERT_EQUAL(sbx_pod_verify(anon.pod, &e), SBX_VERIFY_OWNER_MISMATCH);
	e.owner = "alice";
	CU_ASSERT_EQUAL(sbx_pod_verify(anon.pod, &e), SBX_VERIFY_OWNER_MISMATCH);
	/* Pod with owner alice: neither "no owner" nor "" nor "bob" match. */
	e = expect_of(&alice);
	e.owner = NULL;
	CU_ASSERT_EQUAL(sbx_pod_verify(alice.pod, &e), SBX_VERIFY_OWNER_MISMATCH);
	e.owner = "";
	CU_ASSERT_EQUAL(sbx_pod_verify(alice.pod, &e), SBX_VERIFY_OWNER_MISMATCH);
	e.owner = "bob";
	CU_ASSERT_EQUAL(sbx_pod_verify(alice.pod, &e), SBX_VERIFY_OWNER_MISMATCH);
	/* An owner annotation "" (even correctly sealed) is not "no owner". */
	cJSON *empty = cJSON_Duplicate(anon.pod, 1);
	set_meta(empty, "annotations", SBX_ANN_OWNER, "");
	reseal(empty, KEY);
	e = expect_of(&anon);
	CU_ASSERT_EQUAL(sbx_pod_verify(empty, &e), SBX_VERIFY_OWNER_MISMATCH);
	e.owner = "";
	CU_ASSERT_EQUAL(sbx_pod_verify(empty, &e), SBX_VERIFY_OK);
	cJSON_Delete(empty);
	/* A non-string owner annotation never matches. */
	cJSON *num = cJSON_Duplicate(alice.pod, 1);
	cJSON *ann = cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(num, "metadata"), "annotations");
	cJSON_ReplaceItemInObjectCaseSensitive(ann, SBX_ANN_OWNER, cJSON_CreateNumber(1));
	e = expect_of(&alice);
	CU_ASSERT_EQUAL(sbx_pod_verify(num, &e), SBX_VERIFY_OWNER_MISMATCH);
	cJSON_Delete(num);
	fixture_release(&anon);
	fixture_release(&alice);
}

static void test_verify_str(void)
{
	for (int i = SBX_VERIFY_OK; i <= SBX_VERIFY_PAYLOAD_MISMATCH; i++) {
		const char *s = sbx_verify_str((enum sbx_verify)i);
		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		CU_ASSERT(strlen(s) > 5);
		for (int j = SBX_VERIFY_OK; j < i; j++)
			CU_ASSERT_STRING_NOT_EQUAL(s, sbx_verify_str((enum sbx_verify)j));
	}
}

/* Applies edit to a copy of the fixture's pod and returns the payload verdict. */
static enum sbx_verify payload_after(const struct fixture *f, void (*edit)(cJSON *spec))
{
	cJSON *live = cJSON_Duplicate(f->pod, 1);
	edit(cJSON_GetObjectItemCaseSensitive(live, "spec"));
	struct sbx_certify c = { f->pod, f->spec, &f->cfg };
	char why[256];
	enum sbx_verify v = sbx_pod_payload_verify(live, &c, why, sizeof why);
	cJSON_Delete(live);
	return v;
}

static cJSON *container0(cJSON *spec)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "containers"), 0);
}

static void edit_nothing(cJSON *spec)
{
	(void)spec;
}

static void edit_apiserver_defaults(cJSON *spec)
{
	/* What the apiserver adds must not count as a mismatch. */
	cJSON_AddStringToObject(spec, "dnsPolicy", "ClusterFirst");
	cJSON_AddStringToObject(spec, "schedulerName", "default-scheduler");
	cJSON_AddStringToObject(container0(spec), "imagePullPolicy", "IfNotPresent");
	cJSON_AddStringToObject(container0(spec), "terminationMessagePath", "/dev/termination-log");
}

static void edit_image(cJSON *spec)
{
	cJSON_ReplaceItemInObjectCaseSensitive(container0(spec), "image", cJSON_CreateString("evil:latest"));
}

static void edit_command(cJSON *spec)
{
	cJSON_ReplaceItemInObjectCaseSensitive(container0(spec), "command", cJSON_CreateStringArray((const char *[]){ "sh" }, 1));
}

static void edit_claim(cJSON *spec)
{
	cJSON *v0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "volumes"), 0);
	cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(v0, "persistentVolumeClaim"),
					       "claimName", cJSON_CreateString("bobs-workspaces"));
}

static void edit_subpath(cJSON *spec)
{
	cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(container0(spec), "volumeMounts"), 0);
	cJSON_ReplaceItemInObjectCaseSensitive(m0, "subPath", cJSON_CreateString("bob/workspace"));
}

static void edit_extra_volume(cJSON *spec)
{
	cJSON *v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, "name", "extra");
	cJSON_AddObjectToObject(v, "emptyDir");
	cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(spec, "volumes"), v);
}

static void edit_secret_source(cJSON *spec)
{
	cJSON *v0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "volumes"), 0);
	cJSON_AddObjectToObject(v0, "secret");
}

static void edit_extra_container(cJSON *spec)
{
	cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(spec, "containers"),
			     cJSON_Duplicate(container0(spec), 1));
}

static void edit_init_container(cJSON *spec)
{
	cJSON *ic = cJSON_AddArrayToObject(spec, "initContainers");
	cJSON_AddItemToArray(ic, cJSON_Duplicate(container0(spec), 1));
}

static void edit_env(cJSON *spec)
{
	cJSON *e0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(container0(spec), "env"), 0);
	cJSON_ReplaceItemInObjectCaseSensitive(e0, "value", cJSON_CreateString("2"));
}

static void edit_runtime_class(cJSON *spec)
{
	cJSON_DeleteItemFromObjectCaseSensitive(spec, "runtimeClassName");
}

/* What a namespace's LimitRange with ephemeral-storage defaults does to the
 * sandbox container (whose spec sets cpu and memory only). */
static void edit_limitrange_storage(cJSON *spec)
{
	cJSON *res = cJSON_GetObjectItemCaseSensitive(container0(spec), "resources");
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(res, "limits"), "ephemeral-storage", "1Gi");
	cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(res, "requests"), "ephemeral-storage", "1Gi");
}

static void test_verify_payload(void)
{
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, NULL);
	CU_ASSERT_EQUAL(payload_after(&f, edit_nothing), SBX_VERIFY_OK);
	CU_ASSERT_EQUAL(payload_after(&f, edit_apiserver_defaults), SBX_VERIFY_OK);
	void (*bad[])(cJSON *) = { edit_image, edit_command, edit_claim, edit_subpath,
				   edit_extra_volume, edit_secret_source, edit_extra_container, edit_init_container,
				   edit_env, edit_runtime_class };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CU_ASSERT_EQUAL(payload_after(&f, bad[i]), SBX_VERIFY_PAYLOAD_MISMATCH);
	struct sbx_certify c = { f.pod, f.spec, &f.cfg };
	CU_ASSERT_EQUAL(sbx_pod_payload_verify(NULL, &c, NULL, 0), SBX_VERIFY_MALFORMED);
	fixture_release(&f);
}

/* A pod of a Sandbox naming allow profiles carries their label and
 * annotation, and the controller certifies it as its own; another set of
 * names on it does not pass. */
static void test_verify_profiles(void)
{
	struct fixture f;
	fixture_init(&f, "{\"image\":\"img:1\",\"network\":{\"profiles\":[\"web\",\"db\"]}}", NULL);
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(f.pod, "metadata");
	const cJSON *ann = cJSON_GetObjectItemCaseSensitive(md, "annotations");
	CU_ASSERT_STRING_EQUAL(cJSON_GetObjectItemCaseSensitive(ann, SBX_ANN_NETPROFILES)->valuestring, "db,web");
	const cJSON *lab = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(md, "labels"),
							    SBX_LABEL_NETPROFILES);
	CU_ASSERT_EQUAL(strlen(lab->valuestring), 16);
	CU_ASSERT_EQUAL(payload_after(&f, edit_nothing), SBX_VERIFY_OK);
	cJSON *live = cJSON_Duplicate(f.pod, 1);
	cJSON_ReplaceItemInObjectCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(live, "metadata"), "annotations"),
	    SBX_ANN_NETPROFILES, cJSON_CreateString("db,open"));
	struct sbx_certify c = { f.pod, f.spec, &f.cfg };
	char why[256];
	CU_ASSERT_EQUAL(sbx_pod_payload_verify(live, &c, why, sizeof why), SBX_VERIFY_PAYLOAD_MISMATCH);
	cJSON_Delete(live);
	fixture_release(&f);
}

/* Findings 7 and contract section 4: the restricted Pod Security profile by
 * default, no service links, no token. */
static void test_pod_hardened(void)
{
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, NULL);
	const cJSON *ps = AT(f.pod, "spec");
	CU_ASSERT(cJSON_IsFalse(AT(ps, "automountServiceAccountToken")));
	CU_ASSERT(cJSON_IsFalse(AT(ps, "enableServiceLinks")));
	CU_ASSERT(cJSON_IsTrue(AT(ps, "securityContext", "runAsNonRoot")));
	CU_ASSERT_EQUAL(cJSON_GetNumberValue(AT(ps, "securityContext", "runAsUser")), 1000);
	CU_ASSERT_EQUAL(cJSON_GetNumberValue(AT(ps, "securityContext", "runAsGroup")), 1000);
	CU_ASSERT_EQUAL(cJSON_GetNumberValue(AT(ps, "securityContext", "fsGroup")), 1000);
	CU_ASSERT_STRING_EQUAL(str_at(AT(ps, "securityContext", "seccompProfile", "type")),
			       "RuntimeDefault");
	const cJSON *sc = AT(ps, "containers", "0", "securityContext");
	CU_ASSERT(cJSON_IsFalse(AT(sc, "allowPrivilegeEscalation")));
	CU_ASSERT(cJSON_IsTrue(AT(sc, "runAsNonRoot")));
	CU_ASSERT_STRING_EQUAL(str_at(AT(sc, "capabilities", "drop", "0")), "ALL");
	CU_ASSERT_EQUAL(cJSON_GetArraySize(AT(sc, "capabilities", "drop")), 1);
	CU_ASSERT_PTR_NULL(AT(sc, "capabilities", "add"));
	CU_ASSERT_PTR_NULL(AT(sc, "privileged"));
	fixture_release(&f);
}

/* Contract section 4: hostPath mode is <root>/<namespace>/<owner>/<subdir>,
 * so owners of different namespaces never share a folder. */
static void test_pod_hostpath_namespaced(void)
{
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, "workspace: {mode: hostPath, hostPathRoot: /srv/ws}\n");
	const cJSON *vols = AT(f.pod, "spec", "volumes");
	CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(vols), 4);
	CU_ASSERT_STRING_EQUAL(str_at(AT(vols, "0", "hostPath", "path")), "/srv/ws/team-a/alice/workspace");
	const cJSON *v;
	cJSON_ArrayForEach(v, vols)
	{
		const char *p = str_at(AT(v, "hostPath", "path"));
		CU_ASSERT_EQUAL(strncmp(p, "/srv/ws/team-a/alice/", 21), 0);
		CU_ASSERT_PTR_NULL(strstr(p + 21, "/"));
		CU_ASSERT_PTR_NULL(strstr(p, ".."));
	}
	fixture_release(&f);
}

/* Finding 1: the reviewer's forged pod. Every label and annotation, seal
 * included, is copied from a genuine pod (delete and re-create), plus
 * privileged, hostNetwork, a token and a postStart hook. */
static cJSON *forge_isolation(const cJSON *genuine)
{
	cJSON *pod = cJSON_Duplicate(genuine, 1);
	cJSON *ps = cJSON_GetObjectItemCaseSensitive(pod, "spec");
	cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ps, "containers"), 0);
	cJSON_DeleteItemFromObjectCaseSensitive(ps, "automountServiceAccountToken");
	cJSON_AddTrueToObject(ps, "automountServiceAccountToken");
	cJSON_AddTrueToObject(ps, "hostNetwork");
	cJSON_DeleteItemFromObjectCaseSensitive(c, "securityContext");
	cJSON_AddTrueToObject(cJSON_AddObjectToObject(c, "securityContext"), "privileged");
	cJSON *hook = cJSON_AddObjectToObject(cJSON_AddObjectToObject(c, "lifecycle"), "postStart");
	cJSON_AddItemToObject(cJSON_AddObjectToObject(hook, "exec"), "command",
			      cJSON_CreateStringArray((const char *[]){ "sh", "-c", "curl evil" }, 3));
	return pod;
}

static void test_verify_forged_isolation(void)
{
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, NULL);
	cJSON *forged = forge_isolation(f.pod);
	struct sbx_verify_expect e = expect_of(&f);
	/* The identity checks pass (the seal is genuine)... */
	CU_ASSERT_EQUAL(sbx_pod_verify(forged, &e), SBX_VERIFY_OK);
	/* ...so the payload check must refuse it. */
	struct sbx_certify c = { f.pod, f.spec, &f.cfg };
	char why[256];
	CU_ASSERT_EQUAL(sbx_pod_payload_verify(forged, &c, why, sizeof why),
			SBX_VERIFY_PAYLOAD_MISMATCH);
	cJSON_Delete(forged);
	fixture_release(&f);
}

/* ---- table-driven pod edits for the certificate ---- */

/* Sets the member at path ("spec/containers/0/image") of root to the JSON
 * text val (NULL removes it; a leading '+' appends to the array at path),
 * creating missing objects on the way. A '~' in path is a '/' inside a key. */
static void put(cJSON *root, const char *path, const char *val)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof buf, "%s", path);
	for (char *t = buf; *t; t++)
		if (*t == '~')
			*t = '\x01';
	cJSON *cur = root, *parent = NULL;
	char *tok = strtok_r(buf, "/", &save), *last = NULL;
	while (tok) {
		char *next = strtok_r(NULL, "/", &save);
		for (char *t = tok; *t; t++)
			if (*t == '\x01')
				*t = '/';
		if (!next) {
			last = tok;
			break;
		}
		parent = cur;
		cur = cJSON_IsArray(parent) ? cJSON_GetArrayItem(parent, atoi(tok))
					    : cJSON_GetObjectItemCaseSensitive(parent, tok);
		if (!cur)
			cur = cJSON_AddObjectToObject(parent, tok);
		tok = next;
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(cur);
	CU_ASSERT_PTR_NOT_NULL_FATAL(last);
	if (val && val[0] == '+') {
		cJSON *arr = cJSON_GetObjectItemCaseSensitive(cur, last);
		if (!arr)
			arr = cJSON_AddArrayToObject(cur, last);
		cJSON *item = cJSON_Parse(val + 1);
		CU_ASSERT_PTR_NOT_NULL_FATAL(item);
		cJSON_AddItemToArray(arr, item);
		return;
	}
	if (cJSON_IsArray(cur)) {
		cJSON *item = cJSON_Parse(val);
		CU_ASSERT_PTR_NOT_NULL_FATAL(item);
		cJSON_ReplaceItemInArray(cur, atoi(last), item);
		return;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(cur, last);
	if (val) {
		cJSON *item = cJSON_Parse(val);
		CU_ASSERT_PTR_NOT_NULL_FATAL(item);
		cJSON_AddItemToObject(cur, last, item);
	}
}

struct edit {
	const char *path, *val;
};

/* Certifies a copy of f's pod after the edits (up to a NULL path) against
 * f's expected pod under cfg (NULL = f's own config). */
static enum sbx_verify certify_after(const struct fixture *f, const struct sbx_config *cfg,
				     const struct edit *edits, char *why, size_t whylen)
{
	cJSON *live = cJSON_Duplicate(f->pod, 1);
	for (; edits && edits->path; edits++)
		put(live, edits->path, edits->val);
	struct sbx_certify c = { f->pod, f->spec, cfg ? cfg : &f->cfg };
	enum sbx_verify v = sbx_pod_payload_verify(live, &c, why, whylen);
	cJSON_Delete(live);
	return v;
}

#define C0 "spec/containers/0/"

/* Finding 1: each isolation field on a pod that carries the genuine seal. */
static void test_verify_each_isolation_field(void)
{
	static const struct edit forged[][3] = {
		{ { C0 "securityContext/privileged", "true" } },
		{ { C0 "securityContext/allowPrivilegeEscalation", "true" } },
		{ { C0 "securityContext/allowPrivilegeEscalation", NULL } },
		{ { C0 "securityContext/capabilities/add", "[\"SYS_ADMIN\"]" } },
		{ { C0 "securityContext/capabilities/drop", "[\"NET_RAW\"]" } },
		{ { C0 "securityContext/runAsUser", "0" } },
		{ { C0 "securityContext/runAsNonRoot", "false" } },
		{ { C0 "securityContext/seccompProfile", "{\"type\":\"Unconfined\"}" } },
		{ { C0 "securityContext/procMount", "\"Unmasked\"" } },
		{ { C0 "securityContext/seLinuxOptions", "{\"type\":\"spc_t\"}" } },
		{ { C0 "securityContext", NULL } },
		{ { "spec/securityContext/runAsUser", "0" } },
		{ { "spec/securityContext/runAsNonRoot", NULL } },
		{ { "spec/securityContext/seccompProfile/type", "\"Unconfined\"" } },
		{ { "spec/securityContext/sysctls", "[{\"name\":\"kernel.shm_rmid_forced\",\"value\":\"0\"}]" } },
		{ { "spec/securityContext/supplementalGroups", "[0]" } },
		{ { "spec/securityContext", NULL } },
		{ { "spec/hostNetwork", "true" } },
		{ { "spec/hostPID", "true" } },
		{ { "spec/hostIPC", "true" } },
		{ { "spec/shareProcessNamespace", "true" } },
		{ { "spec/hostUsers", "true" } },
		{ { "spec/hostAliases", "[{\"ip\":\"10.0.0.1\",\"hostnames\":[\"registry\"]}]" } },
		{ { "spec/automountServiceAccountToken", "true" } },
		{ { "spec/automountServiceAccountToken", NULL } },
		{ { "spec/serviceAccountName", "\"admin\"" } },
		{ { "spec/enableServiceLinks", "true" } },
		{ { "spec/restartPolicy", "\"Always\"" } },
		{ { "spec/dnsPolicy", "\"None\"" } },
		{ { "spec/dnsConfig", "{\"nameservers\":[\"6.6.6.6\"]}" } },
		{ { "spec/schedulerName", "\"evil-scheduler\"" } },
		{ { "spec/affinity", "{\"nodeAffinity\":{}}" } },
		{ { "spec/runtimeClassName", NULL } },
		{ { "spec/runtimeClassName", "\"runc\"" } },
		{ { "spec/runtimeClassName", "\"kata\"" } }, /* the spec names gvisor */
		{ { C0 "lifecycle", "{\"postStart\":{\"exec\":{\"command\":[\"sh\"]}}}" } },
		{ { C0 "livenessProbe", "{\"exec\":{\"command\":[\"sh\"]}}" } },
		{ { C0 "readinessProbe", "{\"exec\":{\"command\":[\"sh\"]}}" } },
		{ { C0 "startupProbe", "{\"exec\":{\"command\":[\"sh\"]}}" } },
		{ { C0 "ports", "[{\"containerPort\":22,\"hostPort\":22}]" } },
		{ { C0 "envFrom", "[{\"secretRef\":{\"name\":\"db\"}}]" } },
		{ { C0 "env", "+{\"name\":\"LD_PRELOAD\",\"value\":\"/x.so\"}" } },
		{ { C0 "env/0", "{\"name\":\"A\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\",\"key\":\"k\"}}}" } },
		{ { C0 "workingDir", "\"/\"" } },
		{ { C0 "tty", "true" } },
		{ { C0 "image", "\"evil:latest\"" } },
		{ { C0 "image", "\"registry.local/agent@sha256:0000000000000000000000000000000000000000000000000000000000000000\"" } },
		{ { C0 "command", "[\"sh\"]" } },
		{ { C0 "args", NULL } },
		{ { C0 "resources/limits/cpu", "\"64\"" } },
		{ { C0 "resources/requests/nvidia.com~gpu", "\"1\"" } },
		{ { C0 "volumeDevices", "[{\"name\":\"workspaces\",\"devicePath\":\"/dev/x\"}]" } },
		{ { C0 "volumeMounts", "+{\"name\":\"workspaces\",\"mountPath\":\"/all\"}" } },
		{ { C0 "volumeMounts", "+{\"name\":\"workspaces\",\"mountPath\":\"/bob\",\"subPath\":\"bob/workspace\"}" } },
		{ { C0 "volumeMounts", "+{\"name\":\"workspaces\",\"mountPath\":\"/a\",\"subPath\":\"alice\"}" } },
		{ { C0 "volumeMounts", "+{\"name\":\"workspaces\",\"mountPath\":\"/a\",\"subPath\":\"alice/x/y\"}" } },
		{ { C0 "volumeMounts", "+{\"name\":\"workspaces\",\"mountPath\":\"/a\",\"subPathExpr\":\"alice/$(X)\"}" } },
		{ { C0 "volumeMounts/0/mountPropagation", "\"Bidirectional\"" } },
		{ { "spec/volumes/0/persistentVolumeClaim/claimName", "\"other-claim\"" } },
		{ { "spec/volumes", "+{\"name\":\"host\",\"hostPath\":{\"path\":\"/\"}}" },
		  { C0 "volumeMounts", "+{\"name\":\"host\",\"mountPath\":\"/host\"}" } },
		{ { "spec/volumes", "+{\"name\":\"tok\",\"projected\":{\"sources\":[{\"serviceAccountToken\":{\"path\":\"t\"}}]}}" },
		  { C0 "volumeMounts", "+{\"name\":\"tok\",\"mountPath\":\"/var/run/secrets/x\"}" } },
		{ { "spec/volumes", "+{\"name\":\"unused\",\"emptyDir\":{}}" } },
		{ { "spec/volumes/0/secret", "{\"secretName\":\"x\"}" } },
		{ { "spec/containers", "+{\"name\":\"spy\",\"image\":\"evil\"}" } },
		{ { "spec/containers", "+{\"name\":\"sandbox\",\"image\":\"registry.local/agent:1.0\"}" } },
		{ { "spec/initContainers", "+{\"name\":\"init\",\"image\":\"evil\"}" } },
		{ { "spec/ephemeralContainers", "+{\"name\":\"debug\",\"image\":\"busybox\"}" } },
		{ { "spec/nodeName", "\"n1\"" }, { "spec/hostNetwork", "true" } },
		{ { "spec/activeDeadlineSeconds", "1" } },
		{ { "spec/someFutureField", "{}" } },
		{ { C0 "someFutureField", "{}" } },
		{ { "metadata/labels/role", "\"admin\"" } },
		{ { "metadata/annotations/sandbox.dev~extra", "\"x\"" } },
		{ { "metadata/annotations/container.apparmor.security.beta.kubernetes.io~sandbox", "\"unconfined\"" } },
	};
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, NULL);
	for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
		char why[256] = "";
		cJSON *live = cJSON_Duplicate(f.pod, 1);
		for (int k = 0; k < 2 && forged[i][k].path; k++)
			put(live, forged[i][k].path, forged[i][k].val);
		struct sbx_certify c = { f.pod, f.spec, &f.cfg };
		struct sbx_verify_expect ex = expect_of(&f);
		CU_ASSERT_EQUAL(sbx_pod_verify(live, &ex), SBX_VERIFY_OK); /* the seal is genuine */
		enum sbx_verify got = sbx_pod_payload_verify(live, &c, why, sizeof why);
		if (got != SBX_VERIFY_PAYLOAD_MISMATCH)
			fprintf(stderr, "\n  forged %s=%s was certified\n", forged[i][0].path,
				forged[i][0].val ? forged[i][0].val : "(removed)");
		CU_ASSERT_EQUAL(got, SBX_VERIFY_PAYLOAD_MISMATCH);
		CU_ASSERT(strlen(why) > 5);
		if (getenv("SBX_TEST_VERBOSE"))
			fprintf(stderr, "\n  %s=%s: %s", forged[i][0].path,
				forged[i][0].val ? forged[i][0].val : "(removed)", why);
		cJSON_Delete(live);
	}
	fixture_release(&f);
}

/* What the apiserver, its admission plugins and the scheduler write into
 * the controller's own pod never makes it foreign. */
static void test_verify_apiserver_defaults(void)
{
	static const struct edit defaults[] = {
		{ "spec/dnsPolicy", "\"ClusterFirst\"" },
		{ "spec/schedulerName", "\"default-scheduler\"" },
		{ "spec/serviceAccountName", "\"default\"" },
		{ "spec/serviceAccount", "\"default\"" },
		{ "spec/terminationGracePeriodSeconds", "30" },
		{ "spec/priority", "0" },
		{ "spec/preemptionPolicy", "\"PreemptLowerPriority\"" },
		{ "spec/nodeName", "\"kwok-node-0\"" },
		{ "spec/overhead", "{\"cpu\":\"250m\"}" },
		{ "spec/tolerations", "+{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\","
				      "\"effect\":\"NoExecute\",\"tolerationSeconds\":300}" },
		{ "spec/tolerations", "+{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\","
				      "\"effect\":\"NoExecute\",\"tolerationSeconds\":300}" },
		{ C0 "terminationMessagePath", "\"/dev/termination-log\"" },
		{ C0 "terminationMessagePolicy", "\"File\"" },
		{ C0 "imagePullPolicy", "\"IfNotPresent\"" },
		{ C0 "resizePolicy", "[{\"resourceName\":\"cpu\",\"restartPolicy\":\"NotRequired\"}]" },
		{ C0 "resources/limits/cpu", "\"2000m\"" }, /* the same quantity, spelled otherwise */
		{ C0 "resources/requests/memory", "\"4096Mi\"" },
		{ "spec/volumes/0/persistentVolumeClaim/readOnly", "false" },
		{ "metadata/uid", "\"u-1\"" },
		{ "metadata/annotations/kubectl.kubernetes.io~restartedAt", "\"x\"" },
		{ NULL, NULL },
	};
	struct fixture f;
	char why[256] = "";
	fixture_init(&f, ALICE_SPEC, NULL);
	CU_ASSERT_EQUAL(certify_after(&f, NULL, defaults, why, sizeof why), SBX_VERIFY_OK);
	if (why[0])
		fprintf(stderr, "\n  refused: %s\n", why);
	fixture_release(&f);
	/* A limit without a request: the apiserver copies the limit. */
	static const struct edit copied[] = {
		{ C0 "resources/requests", "{\"cpu\":\"1\",\"memory\":\"1Gi\"}" },
		{ NULL, NULL },
	};
	fixture_init(&f, ANON_SPEC, NULL);
	CU_ASSERT_EQUAL(certify_after(&f, NULL, copied, why, sizeof why), SBX_VERIFY_OK);
	static const struct edit other_request[] = {
		{ C0 "resources/requests", "{\"cpu\":\"100m\"}" },
		{ NULL, NULL },
	};
	CU_ASSERT_EQUAL(certify_after(&f, NULL, other_request, why, sizeof why),
			SBX_VERIFY_PAYLOAD_MISMATCH);
	fixture_release(&f);
}

static const char MUTATIONS_YAML[] =
    "adoption:\n"
    "  allowedMutations:\n"
    "    imageDigestPinning: true\n"
    "    injectedContainers:\n"
    "      - {name: sbx-sidecar, image: \"registry.local/sidecar:*\", volumes: [sidecar-data]}\n"
    "    labels: [sidecar.example/injected]\n";

#define DIGEST64 "sha256:1111111111111111111111111111111111111111111111111111111111111111"

/* Finding 1, the other way round: declared admission mutations keep the
 * controller's own pods bindable; undeclared ones do not. */
static void test_verify_declared_mutations(void)
{
	static const struct edit mutated[] = {
		{ C0 "image", "\"registry.local/agent:1.0@" DIGEST64 "\"" },
		{ "spec/containers", "+{\"name\":\"sbx-sidecar\",\"image\":\"registry.local/sidecar:2\","
				     "\"args\":[\"serve\"],\"ports\":[{\"containerPort\":15000}],"
				     "\"securityContext\":{\"allowPrivilegeEscalation\":false},"
				     "\"volumeMounts\":[{\"name\":\"sidecar-data\",\"mountPath\":\"/data\"}]}" },
		{ "spec/volumes", "+{\"name\":\"sidecar-data\",\"emptyDir\":{}}" },
		{ "metadata/labels/sidecar.example~injected", "\"true\"" },
		{ NULL, NULL },
	};
	struct fixture f, strict;
	char why[256] = "";
	fixture_init(&f, ALICE_SPEC, MUTATIONS_YAML);
	fixture_init(&strict, ALICE_SPEC, NULL);
	cJSON *live = cJSON_Duplicate(f.pod, 1);
	for (const struct edit *x = mutated; x->path; x++)
		put(live, x->path, x->val);
	struct sbx_certify c = { f.pod, f.spec, &f.cfg };
	CU_ASSERT_EQUAL(sbx_pod_payload_verify(live, &c, why, sizeof why), SBX_VERIFY_OK);
	if (why[0])
		fprintf(stderr, "\n  refused: %s\n", why);
	/* The same pod under a configuration that declares nothing. */
	struct sbx_certify cs = { strict.pod, strict.spec, &strict.cfg };
	CU_ASSERT_EQUAL(sbx_pod_payload_verify(live, &cs, why, sizeof why), SBX_VERIFY_PAYLOAD_MISMATCH);
	cJSON_Delete(live);

	/* Each step beyond the declaration is refused. */
	static const struct edit beyond[][3] = {
		{ { C0 "image", "\"registry.local/other@" DIGEST64 "\"" } },
		{ { C0 "image", "\"registry.local/agent:2.0@" DIGEST64 "\"" } },
		{ { C0 "image", "\"registry.local/agent:1.0@sha256:abc\"" } },
		{ { "spec/containers", "+{\"name\":\"sbx-sidecar\",\"image\":\"evil/sidecar:2\"}" } },
		{ { "spec/containers", "+{\"name\":\"other\",\"image\":\"registry.local/sidecar:2\"}" } },
		{ { "spec/initContainers", "+{\"name\":\"sbx-sidecar\",\"image\":\"registry.local/sidecar:2\"}" } },
		{ { "spec/containers", "+{\"name\":\"sbx-sidecar\",\"image\":\"registry.local/sidecar:2\","
				       "\"securityContext\":{\"privileged\":true}}" } },
		{ { "spec/containers", "+{\"name\":\"sbx-sidecar\",\"image\":\"registry.local/sidecar:2\","
				       "\"volumeMounts\":[{\"name\":\"workspaces\",\"mountPath\":\"/w\",\"subPath\":\"alice/workspace\"}]}" } },
		{ { "spec/containers", "+{\"name\":\"sbx-sidecar\",\"image\":\"registry.local/sidecar:2\","
				       "\"volumeMounts\":[{\"name\":\"sidecar-data\",\"mountPath\":\"/d\"}]}" },
		  { "spec/volumes", "+{\"name\":\"sidecar-data\",\"hostPath\":{\"path\":\"/\"}}" } },
		{ { "spec/volumes", "+{\"name\":\"sidecar-data\",\"emptyDir\":{}}" } }, /* no sidecar to own it */
	};
	for (size_t i = 0; i < sizeof beyond / sizeof beyond[0]; i++) {
		CU_ASSERT_EQUAL(certify_after(&f, NULL, beyond[i], why, sizeof why),
				SBX_VERIFY_PAYLOAD_MISMATCH);
	}
	/* Digest pinning of an image given without a tag. */
	CU_ASSERT_EQUAL(sbx_image_matches("busybox@" DIGEST64, "busybox", 1), 1);
	CU_ASSERT_EQUAL(sbx_image_matches("busybox@" DIGEST64, "busybox", 0), 0);
	CU_ASSERT_EQUAL(sbx_image_matches("localhost:5000/a@" DIGEST64, "localhost:5000/a:1", 1), 1);
	CU_ASSERT_EQUAL(sbx_image_matches("localhost:5000/b@" DIGEST64, "localhost:5000/a:1", 1), 0);
	CU_ASSERT_EQUAL(sbx_image_matches("localhost@" DIGEST64, "localhost:5000/a", 1), 0);
	CU_ASSERT_EQUAL(sbx_image_matches("a@" DIGEST64, "a@sha256:2222", 1), 0);
	fixture_release(&f);
	fixture_release(&strict);
}

/* Certifies f's pod after edits under f's config and returns the verdict;
 * prints the reason when the verdict is not the one wanted (want_ok), or
 * always with SBX_TEST_VERBOSE. */
static enum sbx_verify resources_after(const struct fixture *f, const struct edit *edits, int want_ok)
{
	char why[256] = "";
	enum sbx_verify v = certify_after(f, NULL, edits, why, sizeof why);
	if ((v == SBX_VERIFY_OK) != want_ok || getenv("SBX_TEST_VERBOSE"))
		fprintf(stderr, "\n  %s=%s: %s", edits[0].path, edits[0].val ? edits[0].val : "(removed)",
			why[0] ? why : "certified");
	return v;
}

/* adoption.allowedMutations.resourceDefaults: what the namespace's
 * LimitRange fills in where the Sandbox (or the controller's default) sets
 * nothing is accepted for the declared names only; what the Sandbox sets
 * stays exact. */
static void test_verify_resource_defaults(void)
{
	static const char declared_yaml[] =
	    "adoption: {allowedMutations: {resourceDefaults: [ephemeral-storage, cpu]}}\n";
	static const struct edit storage[] = {
		{ C0 "resources/limits/ephemeral-storage", "\"1Gi\"" },
		{ C0 "resources/requests/ephemeral-storage", "\"1Gi\"" },
		{ NULL, NULL },
	};
	struct fixture strict, f;
	char why[256] = "";

	/* Undeclared: refused as before, and the reason names the resource and
	 * the key that would declare it. */
	fixture_init(&strict, ALICE_SPEC, NULL);
	CU_ASSERT_EQUAL(payload_after(&strict, edit_limitrange_storage), SBX_VERIFY_PAYLOAD_MISMATCH);
	CU_ASSERT_EQUAL(certify_after(&strict, NULL, storage, why, sizeof why), SBX_VERIFY_PAYLOAD_MISMATCH);
	if (!strstr(why, "limits.ephemeral-storage") || !strstr(why, "resourceDefaults"))
		fprintf(stderr, "\n  undeclared ephemeral-storage refused as: %s\n", why);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "limits.ephemeral-storage"));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "adoption.allowedMutations.resourceDefaults"));
	fixture_release(&strict);

	/* Declared: the controller's own pod stays bindable, whatever quantity
	 * the LimitRange gives, in limits, requests or both. */
	fixture_init(&f, ALICE_SPEC, declared_yaml);
	CU_ASSERT_EQUAL(payload_after(&f, edit_limitrange_storage), SBX_VERIFY_OK);
	static const struct edit filled[][3] = {
		{ { C0 "resources/limits/ephemeral-storage", "\"1Gi\"" },
		  { C0 "resources/requests/ephemeral-storage", "\"512Mi\"" } },
		{ { C0 "resources/requests/ephemeral-storage", "\"2Gi\"" } },
		{ { C0 "resources/limits/ephemeral-storage", "\"1Gi\"" } },
	};
	for (size_t i = 0; i < sizeof filled / sizeof filled[0]; i++)
		CU_ASSERT_EQUAL(resources_after(&f, filled[i], 1), SBX_VERIFY_OK);

	/* Nothing else loosens: a declared resource the Sandbox sets (cpu, from
	 * the controller's default) is compared exactly, and an undeclared one
	 * is still foreign. */
	static const struct edit beyond[][3] = {
		{ { C0 "resources/limits/cpu", "\"64\"" } },
		{ { C0 "resources/requests/cpu", "\"100m\"" } },
		{ { C0 "resources/limits/cpu", NULL } },
		{ { C0 "resources/requests/cpu", NULL } },
		{ { C0 "resources/limits/memory", "\"64Gi\"" } },
		{ { C0 "resources/limits/nvidia.com~gpu", "\"1\"" } },
		{ { C0 "resources/limits/ephemeral-storage", "\"1Gi\"" },
		  { C0 "resources/requests/example.com~foo", "\"1\"" } },
		{ { C0 "resources/claims", "[{\"name\":\"gpu\"}]" } },
	};
	for (size_t i = 0; i < sizeof beyond / sizeof beyond[0]; i++)
		CU_ASSERT_EQUAL(resources_after(&f, beyond[i], 0), SBX_VERIFY_PAYLOAD_MISMATCH);
	CU_ASSERT_EQUAL(certify_after(&f, NULL, beyond[5], why, sizeof why), SBX_VERIFY_PAYLOAD_MISMATCH);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "nvidia.com/gpu"));
	fixture_release(&f);

	/* A Sandbox that sets only requests: the LimitRange's limits, and its
	 * request of another resource, are accepted when declared; the
	 * Sandbox's own request is not overridden. */
	static const char decl_cpu_mem[] = "adoption: {allowedMutations: {resourceDefaults: [cpu, memory]}}\n";
	fixture_init(&f, "{\"image\":\"img:1\",\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}",
		     decl_cpu_mem);
	static const struct edit req_filled[] = {
		{ C0 "resources/limits", "{\"cpu\":\"1\",\"memory\":\"1Gi\"}" },
		{ C0 "resources/requests/memory", "\"512Mi\"" },
		{ NULL, NULL },
	};
	CU_ASSERT_EQUAL(resources_after(&f, req_filled, 1), SBX_VERIFY_OK);
	static const struct edit req_overridden[] = {
		{ C0 "resources/limits", "{\"cpu\":\"1\"}" },
		{ C0 "resources/requests/cpu", "\"1\"" },
		{ NULL, NULL },
	};
	CU_ASSERT_EQUAL(resources_after(&f, req_overridden, 0), SBX_VERIFY_PAYLOAD_MISMATCH);
	fixture_release(&f);

	/* Only a cpu limit: the apiserver copies it into requests before any
	 * LimitRange looks, so that request is the limit's even though cpu is
	 * declared; memory, which the Sandbox does not set, is filled in. */
	fixture_init(&f, "{\"image\":\"img:1\",\"resources\":{\"limits\":{\"cpu\":\"1\"}}}", decl_cpu_mem);
	static const struct edit lim_filled[] = {
		{ C0 "resources/requests/cpu", "\"1\"" },
		{ C0 "resources/limits/memory", "\"1Gi\"" },
		{ C0 "resources/requests/memory", "\"512Mi\"" },
		{ NULL, NULL },
	};
	CU_ASSERT_EQUAL(resources_after(&f, lim_filled, 1), SBX_VERIFY_OK);
	static const struct edit lim_request_other[] = {
		{ C0 "resources/requests/cpu", "\"500m\"" },
		{ C0 "resources/limits/memory", "\"1Gi\"" },
		{ NULL, NULL },
	};
	CU_ASSERT_EQUAL(resources_after(&f, lim_request_other, 0), SBX_VERIFY_PAYLOAD_MISMATCH);
	fixture_release(&f);
}

/* A pod built under an older configuration (other uid, node selector,
 * tolerations, priority class, pull secrets, mount table, runtime default)
 * is not foreign; other storage is. */
static void test_verify_older_config(void)
{
	static const char old_yaml[] =
	    "workspace:\n"
	    "  mounts: [{subdir: workspace, mountPath: /work}, {subdir: cache, mountPath: /cache}]\n"
	    "pod:\n"
	    "  runAsUser: 2000\n"
	    "  runAsGroup: 3000\n"
	    "  fsGroup: 4000\n"
	    "  nodeSelector: {pool: sandboxes}\n"
	    "  tolerations: [{key: dedicated, operator: Equal, value: sandbox, effect: NoSchedule}]\n"
	    "  priorityClassName: low\n"
	    "  imagePullSecrets: [regcred]\n"
	    "  annotations: {team.example/cost-center: \"42\"}\n"
	    "  runtimeClasses: {allowed: [gvisor, kata], default: kata}\n";
	static const char new_yaml[] =
	    "pod: {nodeSelector: {pool: new}, runtimeClasses: {allowed: [gvisor, kata], default: gvisor}}\n";
	static const char anon_named[] = "{\"image\":\"i:1\",\"idempotencyKey\":\"k\"}";
	struct fixture old, now;
	char why[256] = "";
	fixture_init(&old, ALICE_SPEC, old_yaml);
	fixture_init(&now, ALICE_SPEC, new_yaml);
	struct sbx_certify c = { now.pod, now.spec, &now.cfg };
	CU_ASSERT_EQUAL(sbx_pod_payload_verify(old.pod, &c, why, sizeof why), SBX_VERIFY_OK);
	if (why[0])
		fprintf(stderr, "\n  refused: %s\n", why);
	fixture_release(&old);
	fixture_release(&now);

	/* Runtime class of a Sandbox that names none: the old default (still
	 * allowed) is fine; no class while today has a default is not. */
	fixture_init(&old, anon_named, old_yaml);
	fixture_init(&now, anon_named, new_yaml);
	CU_ASSERT_STRING_EQUAL(str_at(AT(old.pod, "spec", "runtimeClassName")), "kata");
	c = (struct sbx_certify){ now.pod, now.spec, &now.cfg };
	CU_ASSERT_EQUAL(sbx_pod_payload_verify(old.pod, &c, why, sizeof why), SBX_VERIFY_OK);
	cJSON *none = cJSON_Duplicate(old.pod, 1);
	put(none, "spec/runtimeClassName", NULL);
	CU_ASSERT_EQUAL(sbx_pod_payload_verify(none, &c, why, sizeof why), SBX_VERIFY_PAYLOAD_MISMATCH);
	cJSON_Delete(none);
	fixture_release(&old);
	fixture_release(&now);

	/* Other storage is not this owner's workspace. */
	static const char *const storage[] = {
		"workspace: {pvcName: other-ws}\n",
		"workspace: {mode: hostPath, hostPathRoot: /srv/ws}\n",
	};
	for (size_t i = 0; i < 2; i++) {
		fixture_init(&old, ALICE_SPEC, storage[i]);
		fixture_init(&now, ALICE_SPEC, NULL);
		c = (struct sbx_certify){ now.pod, now.spec, &now.cfg };
		CU_ASSERT_EQUAL(sbx_pod_payload_verify(old.pod, &c, why, sizeof why),
				SBX_VERIFY_PAYLOAD_MISMATCH);
		fixture_release(&old);
		fixture_release(&now);
	}
}

/* hostPath mode: never a mount outside <root>/<namespace>/<owner>/. */
static void test_verify_hostpath_confined(void)
{
	static const char *const outside[] = {
		"/srv/ws/team-a/bob/workspace",
		"/srv/ws/team-b/alice/workspace",
		"/srv/ws/alice/workspace",
		"/srv/ws/team-a/alice",
		"/srv/ws/team-a/alice/..",
		"/srv/ws/team-a/alice/workspace/sub",
		"/srv/ws/team-a/alice/.",
		"/srv/ws",
		"/srv/ws/team-a/alice/",
		"/etc",
	};
	struct fixture f;
	char why[256], val[128];
	fixture_init(&f, ALICE_SPEC, "workspace: {mode: hostPath, hostPathRoot: /srv/ws}\n");
	CU_ASSERT_EQUAL(certify_after(&f, NULL, NULL, why, sizeof why), SBX_VERIFY_OK);
	for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
		snprintf(val, sizeof val, "\"%s\"", outside[i]);
		struct edit e[] = { { "spec/volumes/0/hostPath/path", val }, { NULL, NULL } };
		CU_ASSERT_EQUAL(certify_after(&f, NULL, e, why, sizeof why), SBX_VERIFY_PAYLOAD_MISMATCH);
	}
	struct edit sub[] = { { C0 "volumeMounts/0/subPath", "\"x\"" }, { NULL, NULL } };
	CU_ASSERT_EQUAL(certify_after(&f, NULL, sub, why, sizeof why), SBX_VERIFY_PAYLOAD_MISMATCH);
	struct edit type[] = { { "spec/volumes/0/hostPath/type", "\"Socket\"" }, { NULL, NULL } };
	CU_ASSERT_EQUAL(certify_after(&f, NULL, type, why, sizeof why), SBX_VERIFY_PAYLOAD_MISMATCH);
	fixture_release(&f);

	/* The builder itself: every owner, namespace and mount lands below
	 * <root>/<namespace>/<owner>/ in one segment. */
	static const char *const owners[] = { "a", "alice", "a.b", "a-b_c", "x1" };
	for (size_t i = 0; i < sizeof owners / sizeof owners[0]; i++) {
		char spec[128], prefix[128];
		snprintf(spec, sizeof spec, "{\"image\":\"i\",\"workspaceOwner\":\"%s\"}", owners[i]);
		fixture_init(&f, spec, "workspace: {mode: hostPath, hostPathRoot: /srv/ws}\n");
		snprintf(prefix, sizeof prefix, "/srv/ws/team-a/%s/", owners[i]);
		const cJSON *v;
		cJSON_ArrayForEach(v, AT(f.pod, "spec", "volumes"))
		{
			const char *p = str_at(AT(v, "hostPath", "path"));
			CU_ASSERT_EQUAL(strncmp(p, prefix, strlen(prefix)), 0);
			CU_ASSERT_PTR_NULL(strchr(p + strlen(prefix), '/'));
		}
		fixture_release(&f);
	}
}

/* Finding 8: what may change on a bound pod, on the full pod and on the
 * cache's trimmed copy. */
static void test_tamper_check(void)
{
	struct fixture f;
	char why[256];
	fixture_init(&f, ALICE_SPEC, MUTATIONS_YAML);
	struct sbx_certify c = { f.pod, f.spec, &f.cfg };
	CU_ASSERT_EQUAL(sbx_pod_tamper_check(f.pod, &c, why, sizeof why), SBX_VERIFY_OK);
	static const struct edit ok[][2] = {
		{ { C0 "image", "\"registry.local/agent:1.0@" DIGEST64 "\"" } },
		{ { "spec/containers", "+{\"name\":\"sbx-sidecar\",\"image\":\"registry.local/sidecar:9\"}" } },
	};
	static const struct edit bad[][2] = {
		{ { C0 "image", "\"evil:latest\"" } },
		{ { "spec/containers", "+{\"name\":\"spy\",\"image\":\"evil\"}" } },
		{ { "spec/initContainers", "+{\"name\":\"spy\",\"image\":\"evil\"}" } },
		{ { "spec/ephemeralContainers", "+{\"name\":\"debug\",\"image\":\"busybox\"}" } },
		{ { "spec/containers/0/name", "\"renamed\"" } },
	};
	for (int trim = 0; trim < 2; trim++) {
		for (size_t i = 0; i < 2 + sizeof bad / sizeof bad[0]; i++) {
			cJSON *live = cJSON_Duplicate(f.pod, 1);
			const struct edit *e = i < 2 ? ok[i] : bad[i - 2];
			put(live, e->path, e->val);
			if (trim) {
				cJSON *t = sbx_trim_pod(live);
				cJSON_Delete(live);
				live = t;
			}
			CU_ASSERT_EQUAL(sbx_pod_tamper_check(live, &c, why, sizeof why),
					i < 2 ? SBX_VERIFY_OK : SBX_VERIFY_PAYLOAD_MISMATCH);
			cJSON_Delete(live);
		}
	}
	/* The trimmed pod keeps what the identity check and the tamper check read. */
	cJSON *t = sbx_trim_pod(f.pod);
	struct sbx_verify_expect ex = expect_of(&f);
	CU_ASSERT_EQUAL(sbx_pod_verify(t, &ex), SBX_VERIFY_OK);
	CU_ASSERT_EQUAL(sbx_pod_tamper_check(t, &c, why, sizeof why), SBX_VERIFY_OK);
	cJSON_Delete(t);
	/* Too many containers to keep: the trimmed pod says so. */
	cJSON *many = cJSON_Duplicate(f.pod, 1);
	for (int i = 0; i < 5; i++)
		put(many, "spec/containers", "+{\"name\":\"sbx-sidecar\",\"image\":\"registry.local/sidecar:1\"}");
	t = sbx_trim_pod(many);
	CU_ASSERT(cJSON_IsTrue(AT(t, "spec", "truncated")));
	CU_ASSERT_EQUAL(sbx_pod_tamper_check(t, &c, why, sizeof why), SBX_VERIFY_PAYLOAD_MISMATCH);
	cJSON_Delete(t);
	cJSON_Delete(many);
	fixture_release(&f);
}

/* Finding 10: verify with a list of keys, sign with the newest. */
static void test_seal_rotation(void)
{
	static const char old_key[] = "old-key-old-key-old-key-old-key!"; /* KEYLEN bytes */
	static const char new_key[] = "new-key-new-key-new-key-new-key!";
	struct sbx_seal_keys before, after, only_new;
	char err[256], s_old[65], s_new[65];
	sbx_seal_keys_init(&before);
	sbx_seal_keys_init(&after);
	sbx_seal_keys_init(&only_new);
	CU_ASSERT_EQUAL(sbx_seal_keys_parse(&before, old_key, strlen(old_key), "t", err, sizeof err), 1);
	char text[256];
	snprintf(text, sizeof text, "%s\r\n\n%s\n", new_key, old_key); /* newest first */
	CU_ASSERT_EQUAL(sbx_seal_keys_parse(&after, text, strlen(text), "t", err, sizeof err), 2);
	CU_ASSERT_EQUAL(sbx_seal_keys_parse(&only_new, new_key, strlen(new_key), "t", err, sizeof err), 1);
	CU_ASSERT_EQUAL(after.len[0], strlen(new_key));
	CU_ASSERT_EQUAL(sbx_seal_sign(&before, "ns", "p", "d", NULL, "f", "c", s_old), 0);
	CU_ASSERT_EQUAL(sbx_seal_sign(&after, "ns", "p", "d", NULL, "f", "c", s_new), 0);
	CU_ASSERT_STRING_NOT_EQUAL(s_old, s_new);
	/* the newest key signs */
	char direct[65];
	CU_ASSERT_EQUAL(sbx_seal_compute((const unsigned char *)new_key, strlen(new_key), "ns", "p", "d",
					 NULL, "f", "c", direct),
			0);
	CU_ASSERT_STRING_EQUAL(s_new, direct);
	/* a pod sealed before the rotation verifies with the new list (key 1) */
	CU_ASSERT_EQUAL(sbx_seal_check(&after, "ns", "p", "d", NULL, "f", "c", s_old), 1);
	CU_ASSERT_EQUAL(sbx_seal_check(&after, "ns", "p", "d", NULL, "f", "c", s_new), 0);
	CU_ASSERT_EQUAL(sbx_seal_check(&only_new, "ns", "p", "d", NULL, "f", "c", s_old), -1);
	CU_ASSERT_EQUAL(sbx_seal_check(&after, "ns", "p2", "d", NULL, "f", "c", s_old), -1);
	CU_ASSERT_EQUAL(sbx_seal_check(NULL, "ns", "p", "d", NULL, "f", "c", s_old), -1);

	/* ... and so does a whole pod, through sbx_pod_verify. */
	struct fixture f;
	fixture_init(&f, ALICE_SPEC, NULL);
	cJSON *pod = cJSON_Duplicate(f.pod, 1);
	reseal(pod, (const unsigned char *)old_key);
	struct sbx_verify_expect e = expect_of(&f);
	e.keys = &after;
	CU_ASSERT_EQUAL(sbx_pod_verify(pod, &e), SBX_VERIFY_OK);
	e.keys = &only_new;
	CU_ASSERT_EQUAL(sbx_pod_verify(pod, &e), SBX_VERIFY_BAD_SEAL);
	cJSON_Delete(pod);
	fixture_release(&f);

	/* Refusals leave the list unchanged. */
	size_t n = after.n;
	CU_ASSERT_EQUAL(sbx_seal_keys_parse(&after, "short\n", 6, "t", err, sizeof err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 1"));
	snprintf(text, sizeof text, "%s\nshort\n", new_key);
	CU_ASSERT_EQUAL(sbx_seal_keys_parse(&after, text, strlen(text), "t", err, sizeof err), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 2"));
	CU_ASSERT_EQUAL(sbx_seal_keys_parse(&after, "\n\n", 2, "t", err, sizeof err), -1);
	CU_ASSERT_EQUAL(after.n, n);
	struct sbx_seal_keys full;
	sbx_seal_keys_init(&full);
	for (int i = 0; i < SBX_SEAL_MAX_KEYS; i++)
		CU_ASSERT_EQUAL(sbx_seal_keys_parse(&full, new_key, strlen(new_key), "t", err, sizeof err), 1);
	CU_ASSERT_EQUAL(sbx_seal_keys_parse(&full, new_key, strlen(new_key), "t", err, sizeof err), -1);
	/* Release wipes and empties. */
	sbx_seal_keys_release(&full);
	CU_ASSERT_EQUAL(full.n, 0);
	CU_ASSERT_PTR_NULL(full.key[0]);
	CU_ASSERT_EQUAL(sbx_seal_sign(&full, "ns", "p", "d", NULL, "f", "c", s_old), -1);
	sbx_seal_keys_release(&before);
	sbx_seal_keys_release(&after);
	sbx_seal_keys_release(&only_new);
}

/* Item 7: the operator's settings reach the pod; a runtime class outside
 * the allow-list is refused with a message, the default applies when the
 * Sandbox names none. */
static void test_pod_operator_settings(void)
{
	static const char yaml[] =
	    "pod:\n"
	    "  runAsUser: 2000\n"
	    "  nodeSelector: {pool: sandboxes}\n"
	    "  tolerations: [{key: dedicated, operator: Equal, value: sandbox, effect: NoSchedule}]\n"
	    "  priorityClassName: sandbox-low\n"
	    "  imagePullSecrets: [regcred]\n"
	    "  labels: {team: platform}\n"
	    "  annotations: {example.com/note: hi}\n"
	    "  runtimeClasses: {allowed: [gvisor, kata], default: kata}\n";
	struct fixture f;
	fixture_init(&f, ANON_SPEC, yaml);
	const cJSON *ps = AT(f.pod, "spec");
	CU_ASSERT_EQUAL(cJSON_GetNumberValue(AT(ps, "securityContext", "runAsUser")), 2000);
	CU_ASSERT_STRING_EQUAL(str_at(AT(ps, "nodeSelector", "pool")), "sandboxes");
	CU_ASSERT_STRING_EQUAL(str_at(AT(ps, "tolerations", "0", "key")), "dedicated");
	CU_ASSERT_STRING_EQUAL(str_at(AT(ps, "priorityClassName")), "sandbox-low");
	CU_ASSERT_STRING_EQUAL(str_at(AT(ps, "imagePullSecrets", "0", "name")), "regcred");
	CU_ASSERT_STRING_EQUAL(str_at(AT(f.pod, "metadata", "labels", "team")), "platform");
	CU_ASSERT_STRING_EQUAL(str_at(AT(f.pod, "metadata", "annotations", "example.com/note")), "hi");
	CU_ASSERT_STRING_EQUAL(str_at(AT(ps, "runtimeClassName")), "kata");
	/* the pod the controller builds certifies against itself */
	char why[256];
	CU_ASSERT_EQUAL(certify_after(&f, NULL, NULL, why, sizeof why), SBX_VERIFY_OK);
	const char *rc = NULL;
	char msg[256];
	cJSON *spec = cJSON_Parse("{\"image\":\"i\",\"runtimeClassName\":\"runc\"}");
	CU_ASSERT_EQUAL(sbx_pod_runtime_class(spec, &f.cfg, &rc, msg, sizeof msg), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "\"runc\" is not allowed"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "gvisor, kata"));
	struct sbx_pod_params p = { "ns", POD, "sb", "uid", spec, &f.scope, CLAIMED, FP, &f.cfg, NULL };
	CU_ASSERT_PTR_NULL(sbx_pod_build(&p));
	cJSON_Delete(spec);
	fixture_release(&f);
	/* With the default config no class may be named. */
	struct sbx_config d;
	sbx_config_init(&d);
	spec = cJSON_Parse("{\"image\":\"i\",\"runtimeClassName\":\"gvisor\"}");
	CU_ASSERT_EQUAL(sbx_pod_runtime_class(spec, &d, &rc, msg, sizeof msg), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "none"));
	cJSON_Delete(spec);
	spec = cJSON_Parse("{\"image\":\"i\"}");
	CU_ASSERT_EQUAL(sbx_pod_runtime_class(spec, &d, &rc, msg, sizeof msg), 0);
	CU_ASSERT_PTR_NULL(rc);
	cJSON_Delete(spec);
	sbx_config_release(&d);
}

void register_sandbox_pod_tests(void)
{
	SBX_SUITE("sandbox/seal", { "known answer", test_seal_known_answer },
		  { "determinism and sensitivity", test_seal_sensitivity },
		  { "constant-time compare", test_seal_equal });
	SBX_SUITE("sandbox/podbuild", { "owner + PVC", test_pod_pvc },
		  { "owner + hostPath", test_pod_hostpath },
		  { "no owner: emptyDir only", test_pod_no_owner }, { "refusals", test_pod_refusals },
		  { "hardened by default", test_pod_hardened },
		  { "hostPath per namespace", test_pod_hostpath_namespaced },
		  { "operator settings and runtime classes", test_pod_operator_settings });
	SBX_SUITE("sandbox/verify", { "genuine pods", test_verify_genuine },
		  { "each field tampered", test_verify_tampering },
		  { "fingerprint modes and order", test_verify_fingerprint_modes },
		  { "forged pods", test_verify_forged },
		  { "owner presence", test_verify_owner_presence },
		  { "verdict strings", test_verify_str }, { "payload replay", test_verify_payload },
		  { "a pod with allow profiles", test_verify_profiles },
		  { "forged isolation fields", test_verify_forged_isolation },
		  { "each isolation field", test_verify_each_isolation_field },
		  { "apiserver defaults accepted", test_verify_apiserver_defaults },
		  { "declared mutations", test_verify_declared_mutations },
		  { "declared resource defaults", test_verify_resource_defaults },
		  { "older configuration", test_verify_older_config },
		  { "hostPath confined", test_verify_hostpath_confined },
		  { "bound pod tampering", test_tamper_check });
	SBX_SUITE("sandbox/seal-rotation", { "key list", test_seal_rotation });
}
