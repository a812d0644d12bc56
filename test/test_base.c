/* Unit tests for controller/base: the capped buffer and YAML reading. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/buf.h"
#include "base/jsoncount.h"
#include "base/strmap.h"
#include "base/yamljson.h"
#include "base/zpack.h"
#include "test_suites.h"

static void test_buf_cap(void)
{
	struct buf b;
	buf_init(&b, 8);
	CU_ASSERT_EQUAL(buf_appends(&b, "12345678"), 0);
	CU_ASSERT_EQUAL(buf_appends(&b, "9"), -1);
	CU_ASSERT_EQUAL(b.len, 8);
	CU_ASSERT_STRING_EQUAL(b.data, "12345678");
	buf_consume(&b, 3);
	CU_ASSERT_STRING_EQUAL(b.data, "45678");
	CU_ASSERT_EQUAL(buf_appendf(&b, "%d", 123), 0);
	CU_ASSERT_EQUAL(buf_appendf(&b, "%d", 4), -1);
	CU_ASSERT_STRING_EQUAL(b.data, "45678123");
	buf_release(&b);
}

static void test_buf_overflow_arith(void)
{
	struct buf b;
	buf_init(&b, 16);
	CU_ASSERT_EQUAL(buf_append(&b, "x", (size_t)-1), -1);
	CU_ASSERT_EQUAL(b.len, 0);
	buf_release(&b);
}

static void test_yaml_types(void)
{
	const char *y = "a: 1\nb: \"1\"\nc: true\nd: [x, 'y']\ne:\n  f: ~\n";
	char err[256];
	cJSON *j = yaml_to_json(y, strlen(y), err, sizeof err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT(cJSON_IsNumber(cJSON_GetObjectItem(j, "a")));
	CU_ASSERT(cJSON_IsString(cJSON_GetObjectItem(j, "b")));
	CU_ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(j, "c")));
	CU_ASSERT_EQUAL(cJSON_GetArraySize(cJSON_GetObjectItem(j, "d")), 2);
	CU_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "e"), "f")));
	cJSON_Delete(j);
}

static void test_yaml_errors(void)
{
	char err[256];
	const char *bad = "a: [1, 2\n";
	CU_ASSERT_PTR_NULL(yaml_to_json(bad, strlen(bad), err, sizeof err));
	CU_ASSERT(strstr(err, "YAML") != NULL);
	const char *alias = "a: &x [1]\nb: *x\n";
	CU_ASSERT_PTR_NULL(yaml_to_json(alias, strlen(alias), err, sizeof err));
	CU_ASSERT(strstr(err, "alias") != NULL);
	cJSON *empty = yaml_to_json("", 0, err, sizeof err);
	CU_ASSERT(cJSON_IsObject(empty));
	cJSON_Delete(empty);
}

/* Packs text with z and checks it unpacks to the same bytes; returns the
 * packed size. */
static size_t roundtrip(struct zpack *z, const char *text, size_t len)
{
	size_t zlen = 0;
	unsigned char *p = zpack_pack(z, text, len, &zlen);
	char *back = zpack_unpack(z, p, zlen, len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(back);
	CU_ASSERT(memcmp(back, text, len) == 0);
	CU_ASSERT_EQUAL(back[len], '\0');
	free(back);
	free(p);
	return zlen;
}

static void test_zpack_roundtrip(void)
{
	const char *dict = "\"metadata\":{\"name\":\"\",\"namespace\":\"\"}";
	const char *obj = "{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\"}}";
	struct zpack *plain = zpack_new(NULL, 0), *with = zpack_new(dict, strlen(dict));
	CU_ASSERT_EQUAL(roundtrip(plain, "", 0) > 0, 1);
	roundtrip(with, "", 0);
	size_t n_plain = roundtrip(plain, obj, strlen(obj)), n_with = roundtrip(with, obj, strlen(obj));
	CU_ASSERT(n_with < n_plain); /* the dictionary is what makes short texts small */
	/* Larger than the window, and incompressible: still exact. */
	size_t big = 100000;
	char *t = malloc(big);
	uint32_t x = 12345;
	for (size_t i = 0; i < big; i++) {
		x = x * 1103515245u + 12345u;
		t[i] = (char)(x >> 24);
	}
	roundtrip(plain, t, big);
	roundtrip(with, t, big);
	memset(t, 'a', big);
	CU_ASSERT(roundtrip(with, t, big) < big / 50);
	free(t);
	/* The packer is reused: a second pack of the same text is the same. */
	CU_ASSERT_EQUAL(roundtrip(with, obj, strlen(obj)), n_with);
	zpack_free(plain);
	zpack_free(with);
}

static void test_zpack_refuses_bad_input(void)
{
	const char *dict = "\"metadata\":{\"name\":\"\"}";
	const char *obj = "{\"metadata\":{\"name\":\"abc\"},\"spec\":{\"name\":\"abc\"}}";
	size_t len = strlen(obj), zlen;
	struct zpack *z = zpack_new(dict, strlen(dict)), *other = zpack_new("xyz", 3);
	unsigned char *p = zpack_pack(z, obj, len, &zlen);
	CU_ASSERT_PTR_NULL(zpack_unpack(z, p, zlen, len - 1)); /* longer than said */
	CU_ASSERT_PTR_NULL(zpack_unpack(z, p, zlen, len + 1)); /* shorter than said */
	CU_ASSERT_PTR_NULL(zpack_unpack(z, p, zlen - 1, len)); /* cut short */
	char *wrong = zpack_unpack(other, p, zlen, len);       /* another dictionary */
	CU_ASSERT(wrong == NULL || strcmp(wrong, obj) != 0);
	free(wrong);
	unsigned char junk[] = { 0xff, 0xff, 0xff, 0xff, 0x00, 0x01 };
	CU_ASSERT_PTR_NULL(zpack_unpack(z, junk, sizeof junk, 10));
	free(p);
	zpack_free(z);
	zpack_free(other);
	zpack_free(NULL);
}

/* The map under the controller's sets: values made zeroed, kept by key,
 * swept by value, keys past STRMAP_KEY_MAX refused. */
static int odd(const void *value, void *ctx)
{
	(void)ctx;
	return *(const int *)value % 2;
}

static void test_strmap(void)
{
	struct strmap *m = strmap_new(sizeof(int));
	int created = -1;
	strmap_lock(m);
	CU_ASSERT_PTR_NULL(strmap_get(m, "a"));
	int *a = strmap_put(m, "a", &created);
	CU_ASSERT_EQUAL(created, 1);
	CU_ASSERT_EQUAL(*a, 0);
	*a = 1;
	CU_ASSERT_PTR_EQUAL(strmap_put(m, "a", &created), a);
	CU_ASSERT_EQUAL(created, 0);
	*(int *)strmap_put(m, "b", NULL) = 2;
	*(int *)strmap_put(m, "c", NULL) = 3;
	CU_ASSERT_EQUAL(strmap_count(m), 3);
	strmap_sweep(m, odd, NULL);
	CU_ASSERT_EQUAL(strmap_count(m), 1);
	CU_ASSERT_EQUAL(*(int *)strmap_get(m, "b"), 2);
	strmap_del(m, "b");
	strmap_del(m, "absent");
	CU_ASSERT_EQUAL(strmap_count(m), 0);
	char key[STRMAP_KEY_MAX + 2];
	memset(key, 'k', sizeof key - 1);
	key[sizeof key - 1] = '\0';
	CU_ASSERT_PTR_NULL(strmap_put(m, key, &created));
	CU_ASSERT_EQUAL(created, 0);
	key[STRMAP_KEY_MAX] = '\0';
	CU_ASSERT_PTR_NOT_NULL(strmap_put(m, key, NULL));
	strmap_unlock(m);
	strmap_free(m);
	strmap_free(NULL);
}

/* Values are counted without parsing, strings (with escapes) as one, an
 * object's key as a string; a text need not be valid, nor end in NUL. */
static void test_json_count_values(void)
{
	static const struct {
		const char *json;
		size_t n;
	} cases[] = {
		{ "0", 1 },
		{ "[0,0,0]", 4 },
		{ "{\"a\":1}", 3 },	 /* the object, its key, its value */
		{ "\"a,b:[{\\\"\"", 1 }, /* separators inside a string */
		{ "[true, false, null, -1.5e3]", 5 },
		{ "{\"labels\":{\"a\":\"\",\"b\":\"\"}}", 7 },
		{ "", 0 },
		{ "[[[", 3 }, /* not JSON: counted all the same */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		CU_ASSERT_EQUAL(json_count_values(cases[i].json, strlen(cases[i].json)), cases[i].n);
	/* only len bytes are looked at */
	CU_ASSERT_EQUAL(json_count_values("[0,0,0]", 4), 3);
	/* an escape at the very end does not read past it */
	CU_ASSERT_EQUAL(json_count_values("\"\\", 2), 1);
}

void register_base_tests(void)
{
	SBX_SUITE("base", { "buf cap", test_buf_cap }, { "strmap", test_strmap }, { "buf overflow arithmetic", test_buf_overflow_arith },
		  { "yaml scalar types", test_yaml_types }, { "yaml errors", test_yaml_errors },
		  { "zpack round trip", test_zpack_roundtrip }, { "zpack refuses bad input", test_zpack_refuses_bad_input },
		  { "JSON values counted unparsed", test_json_count_values });
}
