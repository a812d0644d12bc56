/* Unit tests for controller/sandbox/{scope,spec}: the contract's scope
 * vectors, the digest's encoding, and spec validation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/buf.h"
#include "sandbox/jcs.h"
#include "sandbox/scope.h"
#include "sandbox/spec.h"
#include "test_suites.h"

void register_sandbox_scope_tests(void); /* called from test_sandbox_all.c */

static cJSON *load_vectors(void)
{
	struct buf b;
	buf_init(&b, 1024 * 1024);
	if (buf_read_file(&b, SBX_TEST_DATA "/scope-vectors.json") < 0) {
		buf_release(&b);
		return NULL;
	}
	cJSON *v = cJSON_Parse(b.data);
	buf_release(&b);
	return v;
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "<missing>";
}

static void test_scope_vectors(void)
{
	cJSON *doc = load_vectors();
	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	const cJSON *cases = cJSON_GetObjectItemCaseSensitive(doc, "cases");
	CU_ASSERT_FATAL(cJSON_IsArray(cases));
	CU_ASSERT_EQUAL(cJSON_GetArraySize(cases), 9);
	int n = 0;
	for (const cJSON *c = cases->child; c; c = c->next, n++) {
		const cJSON *spec = cJSON_GetObjectItemCaseSensitive(c, "spec");
		char *canon = jcs_string(spec);
		CU_ASSERT_PTR_NOT_NULL_FATAL(canon);
		CU_ASSERT_STRING_EQUAL(canon, str(c, "specJCS"));
		free(canon);

		struct sbx_scope sc;
		char err[256], pod[64];
		CU_ASSERT_EQUAL_FATAL(sbx_scope_compute(str(c, "namespace"), str(c, "uid"), spec,
							&sc, err, sizeof err),
				      0);
		CU_ASSERT_STRING_EQUAL(sc.fingerprint, str(c, "specFingerprint"));
		CU_ASSERT_STRING_EQUAL(sc.digest, str(c, "scopeDigest"));
		sbx_pod_name(&sc, 0, pod, sizeof pod);
		CU_ASSERT_STRING_EQUAL(pod, str(c, "podName"));
		char msg[256];
		CU_ASSERT_EQUAL(sbx_spec_validate(spec, msg, sizeof msg), 0);
	}
	CU_ASSERT_EQUAL(n, 9);
	cJSON_Delete(doc);
}

/* Computes the digest of spec_json in namespace ns with uid; asserts success. */
static void scope_of(const char *ns, const char *uid, const char *spec_json, struct sbx_scope *out)
{
	char err[256];
	cJSON *spec = cJSON_Parse(spec_json);
	CU_ASSERT_PTR_NOT_NULL_FATAL(spec);
	CU_ASSERT_EQUAL(sbx_scope_compute(ns, uid, spec, out, err, sizeof err), 0);
	cJSON_Delete(spec);
}

static void test_scope_distinctions(void)
{
	struct sbx_scope none, empty, alice, ab_cd, a_bcd, x, y;
	scope_of("team-a", "u1", "{\"image\":\"i\",\"idempotencyKey\":\"k\"}", &none);
	scope_of("team-a", "u1",
		 "{\"image\":\"i\",\"idempotencyKey\":\"k\",\"workspaceOwner\":\"\"}", &empty);
	scope_of("team-a", "u1",
		 "{\"image\":\"i\",\"idempotencyKey\":\"k\",\"workspaceOwner\":\"alice\"}", &alice);
	CU_ASSERT_STRING_NOT_EQUAL(none.digest, empty.digest);
	CU_ASSERT_STRING_NOT_EQUAL(none.digest, alice.digest);
	CU_ASSERT_STRING_NOT_EQUAL(empty.digest, alice.digest);

	/* Length prefixes keep ("ab","cd") apart from ("a","bcd"). */
	scope_of("team-a", "u1",
		 "{\"image\":\"i\",\"idempotencyKey\":\"cd\",\"workspaceOwner\":\"ab\"}", &ab_cd);
	scope_of("team-a", "u1",
		 "{\"image\":\"i\",\"idempotencyKey\":\"bcd\",\"workspaceOwner\":\"a\"}", &a_bcd);
	CU_ASSERT_STRING_NOT_EQUAL(ab_cd.digest, a_bcd.digest);

	/* With an owner and a key, the spec and uid do not move the digest... */
	scope_of("team-a", "u1",
		 "{\"image\":\"i\",\"idempotencyKey\":\"k\",\"workspaceOwner\":\"alice\"}", &x);
	scope_of("team-a", "u2",
		 "{\"workspaceOwner\":\"alice\",\"image\":\"j\",\"idempotencyKey\":\"k\"}", &y);
	CU_ASSERT_STRING_EQUAL(x.digest, y.digest);
	CU_ASSERT_STRING_NOT_EQUAL(x.fingerprint, y.fingerprint);
	/* ...but the namespace does. */
	scope_of("team-b", "u1",
		 "{\"image\":\"i\",\"idempotencyKey\":\"k\",\"workspaceOwner\":\"alice\"}", &y);
	CU_ASSERT_STRING_NOT_EQUAL(x.digest, y.digest);
	/* Without an owner the spec scopes the key; member order does not. */
	scope_of("team-a", "u1", "{\"image\":\"i\",\"idempotencyKey\":\"k\"}", &x);
	scope_of("team-a", "u9", "{\"idempotencyKey\":\"k\",\"image\":\"i\"}", &y);
	CU_ASSERT_STRING_EQUAL(x.digest, y.digest);
	CU_ASSERT_STRING_EQUAL(x.fingerprint, y.fingerprint);
	scope_of("team-a", "u1", "{\"image\":\"i2\",\"idempotencyKey\":\"k\"}", &y);
	CU_ASSERT_STRING_NOT_EQUAL(x.digest, y.digest);
	/* Without a key each Sandbox (uid) stands alone. */
	scope_of("team-a", "u1", "{\"image\":\"i\",\"workspaceOwner\":\"alice\"}", &x);
	scope_of("team-a", "u2", "{\"image\":\"i\",\"workspaceOwner\":\"alice\"}", &y);
	CU_ASSERT_STRING_NOT_EQUAL(x.digest, y.digest);
	CU_ASSERT_EQUAL(strlen(x.digest), 32);
	CU_ASSERT_EQUAL(strlen(x.fingerprint), 64);
}

static void test_scope_errors(void)
{
	struct sbx_scope sc;
	char err[256];
	static const char *const bad[] = {
		"{\"image\":\"i\",\"workspaceOwner\":5}",		      /* never read as "no owner" */
		"{\"image\":\"i\",\"idempotencyKey\":null}",		      /* never read as "no key" */
		"{\"image\":\"i\",\"idempotencyKey\":\"k\",\"x\":1,\"x\":2}", /* duplicate */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cJSON *spec = cJSON_Parse(bad[i]);
		CU_ASSERT_PTR_NOT_NULL_FATAL(spec);
		strcpy(sc.digest, "junk");
		CU_ASSERT_EQUAL(sbx_scope_compute("ns", "uid", spec, &sc, err, sizeof err), -1);
		CU_ASSERT_STRING_EQUAL(sc.digest, "");
		CU_ASSERT(strncmp(err, "scope: ", 7) == 0);
		cJSON_Delete(spec);
	}
	cJSON *spec = cJSON_Parse("{\"image\":\"i\"}");
	CU_ASSERT_EQUAL(sbx_scope_compute("ns", NULL, spec, &sc, err, sizeof err), -1);
	CU_ASSERT(strstr(err, "uid") != NULL);
	CU_ASSERT_EQUAL(sbx_scope_compute(NULL, "u", spec, &sc, err, sizeof err), -1);
	cJSON_Delete(spec);
	cJSON *bad_utf8 = cJSON_CreateObject();
	cJSON_AddStringToObject(bad_utf8, "image", "\xff");
	CU_ASSERT_EQUAL(sbx_scope_compute("ns", "u", bad_utf8, &sc, err, sizeof err), -1);
	CU_ASSERT(strstr(err, "canonicalized") != NULL);
	cJSON_Delete(bad_utf8);
}

static void test_pod_name(void)
{
	struct sbx_scope sc = { .digest = "a2c8db0f290b9f479603660ab6f7894e" };
	char out[64];
	sbx_pod_name(&sc, 0, out, sizeof out);
	CU_ASSERT_STRING_EQUAL(out, "sbx-a2c8db0f290b9f479603660ab6f7894e");
	sbx_pod_name(&sc, 1, out, sizeof out);
	CU_ASSERT_STRING_EQUAL(out, "sbx-a2c8db0f290b9f479603660ab6f7894e-1");
	sbx_pod_name(&sc, 4294967295u, out, sizeof out);
	CU_ASSERT_STRING_EQUAL(out, "sbx-a2c8db0f290b9f479603660ab6f7894e-4294967295");
}

static void test_owner_valid(void)
{
	char s63[64], s64[65];
	memset(s63, 'a', 63);
	s63[63] = '\0';
	memset(s64, 'a', 64);
	s64[64] = '\0';
	static const struct {
		const char *s;
		int ok;
	} t[] = {
		{ "a", 1 },
		{ "alice", 1 },
		{ "a.b_c-d", 1 },
		{ "0", 1 },
		{ "a..b", 1 },
		{ "", 0 },
		{ "..", 0 },
		{ "../x", 0 },
		{ "a/b", 0 },
		{ "-a", 0 },
		{ "a-", 0 },
		{ "a.", 0 },
		{ "_a", 0 },
		{ "Alice", 0 },
		{ "al ice", 0 },
		{ "al\nice", 0 },
		{ "\xc3\xa9", 0 },
		{ ".", 0 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		if (sbx_owner_valid(t[i].s) != t[i].ok)
			fprintf(stderr, "owner \"%s\": want %d\n", t[i].s, t[i].ok);
		CU_ASSERT_EQUAL(sbx_owner_valid(t[i].s), t[i].ok);
	}
	CU_ASSERT_EQUAL(sbx_owner_valid(s63), 1);
	CU_ASSERT_EQUAL(sbx_owner_valid(s64), 0);
	CU_ASSERT_EQUAL(sbx_owner_valid(NULL), 0);
}

static void test_key_valid(void)
{
	char k255[256], k256[257];
	memset(k255, 'k', 255);
	k255[255] = '\0';
	memset(k256, 'k', 256);
	k256[256] = '\0';
	static const struct {
		const char *s;
		int ok;
	} t[] = {
		{ "task-42", 1 },
		{ "\xe4\xbb\xbb\xe5\x8a\xa1-42", 1 }, /* 任务-42 */
		{ "with space/and:punct", 1 },
		{ "\xf0\x9f\x98\x80", 1 },
		{ "\xc2\xa0", 1 }, /* U+00A0, just past C1 */
		{ "", 0 },
		{ "\x01", 0 },
		{ "a\tb", 0 },
		{ "a\nb", 0 },
		{ "\x7f", 0 },
		{ "\xc2\x85", 0 }, /* C1 NEL */
		{ "\xc2\x80", 0 },
		{ "\xc2\x9f", 0 },
		{ "\xff", 0 },
		{ "\xed\xa0\x80", 0 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		CU_ASSERT_EQUAL(sbx_key_valid(t[i].s), t[i].ok);
	CU_ASSERT_EQUAL(sbx_key_valid(k255), 1);
	CU_ASSERT_EQUAL(sbx_key_valid(k256), 0);
	/* 255 BYTES, not characters: 85 three-byte characters fit, 86 do not. */
	char u[3 * 86 + 1];
	for (int i = 0; i < 86; i++)
		memcpy(u + 3 * i, "\xe4\xbb\xbb", 3);
	u[3 * 85] = '\0';
	CU_ASSERT_EQUAL(sbx_key_valid(u), 1);
	memcpy(u + 3 * 85, "\xe4\xbb\xbb", 3);
	u[3 * 86] = '\0';
	CU_ASSERT_EQUAL(sbx_key_valid(u), 0);
	CU_ASSERT_EQUAL(sbx_key_valid(NULL), 0);
}

/* Validates spec_json; want_msg NULL means valid, else the exact message. */
static void check_spec(const char *spec_json, const char *want_msg)
{
	char msg[512];
	cJSON *spec = cJSON_Parse(spec_json);
	CU_ASSERT_PTR_NOT_NULL_FATAL(spec);
	int rc = sbx_spec_validate(spec, msg, sizeof msg);
	if (!want_msg) {
		CU_ASSERT_EQUAL(rc, 0);
		CU_ASSERT_STRING_EQUAL(msg, "");
	} else {
		CU_ASSERT_EQUAL(rc, -1);
		if (strcmp(msg, want_msg) != 0)
			fprintf(stderr, "\n  got  %s\n  want %s\n", msg, want_msg);
		CU_ASSERT_STRING_EQUAL(msg, want_msg);
	}
	cJSON_Delete(spec);
}

static void test_spec_validate(void)
{
	check_spec("{\"image\":\"i\"}", NULL);
	check_spec("{\"image\":\"i\",\"command\":[\"sh\"],\"args\":[\"-c\",\"x\"],\"env\":[{"
		   "\"name\":\"A\","
		   "\"value\":\"1\"},{\"name\":\"B\"}],\"resources\":{\"limits\":{\"cpu\":\"1\"}},"
		   "\"runtimeClassName\":\"gvisor\",\"idempotencyKey\":\"k\",\"workspaceOwner\":"
		   "\"alice\"}",
		   NULL);
	check_spec("{}", "spec.image is required");
	check_spec("{\"image\":\"\"}", "spec.image must be a non-empty string");
	check_spec("{\"image\":3}", "spec.image must be a non-empty string");
	check_spec("{\"image\":\"i\",\"command\":\"sh\"}",
		   "spec.command must be an array of strings");
	check_spec("{\"image\":\"i\",\"args\":[\"a\",1]}", "spec.args[1] must be a string");
	check_spec("{\"image\":\"i\",\"env\":{}}", "spec.env must be an array of {name, value}");
	check_spec("{\"image\":\"i\",\"env\":[{\"value\":\"v\"}]}",
		   "spec.env[0].name must be a non-empty string");
	check_spec("{\"image\":\"i\",\"env\":[{\"name\":\"A\"},{\"name\":\"B\",\"value\":2}]}",
		   "spec.env[1].value must be a string");
	check_spec("{\"image\":\"i\",\"env\":[\"A=1\"]}",
		   "spec.env[0] must be an object with name and value");
	check_spec("{\"image\":\"i\",\"resources\":\"big\"}",
		   "spec.resources must be an object (core/v1 ResourceRequirements)");
	check_spec("{\"image\":\"i\",\"resources\":{\"requests\":[]}}",
		   "spec.resources.requests must be an object");
	/* Found by fuzz/fuzz_object.c: a member the pod builder would copy but
	 * the adoption check refuses (the API prunes it; the controller must not
	 * build a pod it would not adopt). */
	check_spec("{\"image\":\"i\",\"resources\":{\"limit\":{\"cpu\":\"2\"}}}",
		   "spec.resources may only hold limits and requests");
	/* Also found by it: a quantity the apiserver refuses would give a pod
	 * the controller could never adopt. */
	check_spec("{\"image\":\"i\",\"resources\":{\"requests\":{\"memory\":\"4G00i\"}}}",
		   "spec.resources.requests.memory is not a quantity");
	check_spec("{\"image\":\"i\",\"runtimeClassName\":1}",
		   "spec.runtimeClassName must be a non-empty string");
	check_spec("{\"image\":\"i\",\"workspaceOwner\":\"../x\"}",
		   "spec.workspaceOwner \"../x\" is invalid: must match " SBX_OWNER_PATTERN);
	check_spec("{\"image\":\"i\",\"workspaceOwner\":\"\"}",
		   "spec.workspaceOwner \"\" is invalid: must match " SBX_OWNER_PATTERN
		   " (omit the field for no owner)");
	check_spec("{\"image\":\"i\",\"workspaceOwner\":null}",
		   "spec.workspaceOwner must be a string");
	check_spec("{\"image\":\"i\",\"idempotencyKey\":\"a\\u0001\\\"b\"}",
		   "spec.idempotencyKey \"a\\x01\\x22b\" is invalid: must be 1..255 bytes of UTF-8 "
		   "without control characters");
	check_spec(
	    "{\"image\":\"i\",\"idempotencyKey\":\"\"}",
	    "spec.idempotencyKey \"\" is invalid: must be 1..255 bytes of UTF-8 without control "
	    "characters");
	check_spec("{\"image\":\"i\",\"idempotencyKey\":7}",
		   "spec.idempotencyKey must be a string");
	check_spec("[]", "spec must be an object");

	/* Long hostile values are cut in the message. */
	char big[600], msg[512];
	memset(big, 'A', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	cJSON *spec = cJSON_CreateObject();
	cJSON_AddStringToObject(spec, "image", "i");
	cJSON_AddStringToObject(spec, "workspaceOwner", big);
	CU_ASSERT_EQUAL(sbx_spec_validate(spec, msg, sizeof msg), -1);
	CU_ASSERT(strstr(msg, "AAAA...\" is invalid") != NULL);
	CU_ASSERT(strlen(msg) < 200);
	cJSON_Delete(spec);
	CU_ASSERT_EQUAL(sbx_spec_validate(NULL, msg, sizeof msg), -1);
}

static void test_spec_accessors(void)
{
	cJSON *spec =
	    cJSON_Parse("{\"image\":\"i\",\"workspaceOwner\":\"\",\"idempotencyKey\":\"k\"}");
	CU_ASSERT_PTR_NOT_NULL_FATAL(sbx_spec_owner(spec));
	CU_ASSERT_STRING_EQUAL(sbx_spec_owner(spec), "");
	CU_ASSERT_STRING_EQUAL(sbx_spec_key(spec), "k");
	cJSON_Delete(spec);
	spec = cJSON_Parse("{\"image\":\"i\"}");
	CU_ASSERT_PTR_NULL(sbx_spec_owner(spec));
	CU_ASSERT_PTR_NULL(sbx_spec_key(spec));
	cJSON_Delete(spec);
}

void register_sandbox_scope_tests(void)
{
	SBX_SUITE("sandbox/scope", { "contract vectors", test_scope_vectors },
		  { "owner/key/namespace distinctions", test_scope_distinctions },
		  { "errors", test_scope_errors }, { "pod names", test_pod_name });
	SBX_SUITE("sandbox/spec", { "owner validation", test_owner_valid },
		  { "key validation", test_key_valid },
		  { "spec validation messages", test_spec_validate },
		  { "owner/key accessors", test_spec_accessors });
}
