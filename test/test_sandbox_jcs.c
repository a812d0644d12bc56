/* Unit tests for controller/sandbox/jcs: RFC 8785 canonicalization. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "sandbox/jcs.h"
#include "test_suites.h"

void register_sandbox_jcs_tests(void); /* called from test_sandbox_all.c */

/* Parses json, canonicalizes it and compares with want (NULL: must fail). */
static void check_canon(const char *json, const char *want)
{
	cJSON *v = cJSON_Parse(json);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v);
	char *got = jcs_string(v);
	if (want) {
		CU_ASSERT_PTR_NOT_NULL(got);
		if (got)
			CU_ASSERT_STRING_EQUAL(got, want);
	} else {
		CU_ASSERT_PTR_NULL(got);
	}
	free(got);
	cJSON_Delete(v);
}

static void test_jcs_ordering(void)
{
	check_canon("{\"b\":1,\"a\":2,\"Z\":3,\"aa\":4,\"\":5}",
		    "{\"\":5,\"Z\":3,\"a\":2,\"aa\":4,\"b\":1}");
	/* RFC 8785 section 3.2.3's sorting example. */
	check_canon(
	    "{\"\\u20ac\":\"Euro Sign\",\"\\r\":\"Carriage Return\",\"\\ufb33\":\"Hebrew\","
	    "\"1\":\"One\",\"\\ud83d\\ude00\":\"Emoji\",\"\\u0080\":\"Control\","
	    "\"\\u00f6\":\"o\"}",
	    "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\xc2\x80\":\"Control\","
	    "\"\xc3\xb6\":\"o\",\"\xe2\x82\xac\":\"Euro Sign\",\"\xf0\x9f\x98\x80\":\"Emoji\","
	    "\"\xef\xac\xb3\":\"Hebrew\"}");
	/* U+E000 sorts after U+1F600 in UTF-16 (0xD83D < 0xE000) but before
	 * it in UTF-8 byte order (0xEE < 0xF0). */
	check_canon("{\"\xee\x80\x80\":1,\"\xf0\x9f\x98\x80\":2}",
		    "{\"\xf0\x9f\x98\x80\":2,\"\xee\x80\x80\":1}");
	/* Nested objects are sorted too, arrays keep their order. */
	check_canon("{\"z\":{\"y\":1,\"x\":[3,1,2]},\"a\":[{\"d\":0,\"c\":0}]}",
		    "{\"a\":[{\"c\":0,\"d\":0}],\"z\":{\"x\":[3,1,2],\"y\":1}}");
}

static void test_jcs_whitespace_and_literals(void)
{
	check_canon(" [ [ 1 , [ 2 , { \"b\" : [ ] , \"a\" : { } } ] ] , [ ] , \"x\" , true , false "
		    ", null ] ",
		    "[[1,[2,{\"a\":{},\"b\":[]}]],[],\"x\",true,false,null]");
	check_canon("{}", "{}");
	check_canon("[]", "[]");
	check_canon("\"\"", "\"\"");
}

static void test_jcs_escaping(void)
{
	cJSON *s = cJSON_CreateString("q\"b\\\b\f\n\r\t\x01\x1f\x7f/\xc3\xa9\xe2\x82\xac");
	char *got = jcs_string(s);
	CU_ASSERT_PTR_NOT_NULL_FATAL(got);
	CU_ASSERT_STRING_EQUAL(
	    got, "\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\x7f/\xc3\xa9\xe2\x82\xac\"");
	free(got);
	cJSON_Delete(s);
	/* Escapes in the input are resolved and re-emitted canonically. */
	check_canon("[\"\\u0041\\u00e9\\/\\u000b\"]", "[\"A\xc3\xa9/\\u000b\"]");
	/* Keys are escaped the same way. */
	check_canon("{\"a\\nb\":1}", "{\"a\\nb\":1}");
}

static void check_number(double d, const char *want)
{
	char out[32];
	CU_ASSERT_EQUAL_FATAL(jcs_format_number(d, out, sizeof out), 0);
	CU_ASSERT_STRING_EQUAL(out, want);
}

static double from_bits(uint64_t b)
{
	double d;
	memcpy(&d, &b, sizeof d);
	return d;
}

static void test_jcs_numbers(void)
{
	check_number(0, "0");
	check_number(-0.0, "0");
	check_number(2, "2");
	check_number(-2, "-2");
	check_number(0.1, "0.1");
	check_number(4.5, "4.5");
	check_number(0.002, "0.002");
	check_number(1e-7, "1e-7");
	check_number(1.5e-7, "1.5e-7");
	check_number(0.000001, "0.000001");
	check_number(1e20, "100000000000000000000");
	check_number(1e21, "1e+21");
	check_number(123e30, "1.23e+32");
	check_number(0.1 + 0.2, "0.30000000000000004");
	/* RFC 8785 appendix B. */
	check_number(from_bits(0x0000000000000001ULL), "5e-324");
	check_number(from_bits(0x8000000000000001ULL), "-5e-324");
	check_number(from_bits(0x7fefffffffffffffULL), "1.7976931348623157e+308");
	check_number(from_bits(0x4340000000000000ULL), "9007199254740992");
	check_number(from_bits(0x4430000000000000ULL), "295147905179352830000");
	check_number(from_bits(0x44b52d02c7e14af5ULL), "9.999999999999997e+22");
	check_number(from_bits(0x44b52d02c7e14af6ULL), "1e+23");
	check_number(from_bits(0x44b52d02c7e14af7ULL), "1.0000000000000001e+23");
	check_number(from_bits(0x444b1ae4d6e2ef4fULL), "999999999999999900000");
	check_number(from_bits(0x444b1ae4d6e2ef50ULL), "1e+21");
	check_number(from_bits(0x3eb0c6f7a0b5ed8cULL), "9.999999999999997e-7");
	check_number(from_bits(0x3eb0c6f7a0b5ed8dULL), "0.000001");
	check_number(from_bits(0x41b3de4355555554ULL), "333333333.33333325");
	check_number(from_bits(0x41b3de4355555557ULL), "333333333.33333343");
	check_number(from_bits(0xbecbf647612f3696ULL), "-0.0000033333333333333333");
	check_number(from_bits(0x43143ff3c1cb0959ULL), "1424953923781206.2");
	char out[32];
	CU_ASSERT_EQUAL(jcs_format_number(NAN, out, sizeof out), -1);
	CU_ASSERT_EQUAL(jcs_format_number(INFINITY, out, sizeof out), -1);
	CU_ASSERT_EQUAL(jcs_format_number(-INFINITY, out, sizeof out), -1);
	/* Through the tree, parsed numbers: no ".0", exponent forms kept. */
	check_canon("[1.0,2e0,-0.0,1E21,1e-7,100,0.5e1]", "[1,2,0,1e+21,1e-7,100,5]");
	cJSON *nan = cJSON_CreateArray();
	cJSON_AddItemToArray(nan, cJSON_CreateNumber(NAN));
	CU_ASSERT_PTR_NULL(jcs_string(nan));
	cJSON_Delete(nan);
}

static void test_jcs_refusals(void)
{
	static const char *const bad[] = {
		"\xc3\x28",	    /* bad continuation */
		"\xc0\xaf",	    /* overlong '/' */
		"\xe0\x80\xaf",	    /* overlong, 3 bytes */
		"\xed\xa0\x80",	    /* surrogate U+D800 */
		"\xf4\x90\x80\x80", /* above U+10FFFF */
		"\xff",		    /* never valid */
		"abc\xe2\x82",	    /* truncated */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cJSON *s = cJSON_CreateString(bad[i]);
		CU_ASSERT_PTR_NULL(jcs_string(s));
		cJSON_Delete(s);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, bad[i], 1);
		CU_ASSERT_PTR_NULL(jcs_string(o));
		cJSON_Delete(o);
	}
	/* Duplicate member names make the canonical form ambiguous. */
	check_canon("{\"a\":1,\"b\":2,\"a\":3}", NULL);
	cJSON *raw = cJSON_CreateArray();
	cJSON_AddItemToArray(raw, cJSON_CreateRaw("{}"));
	CU_ASSERT_PTR_NULL(jcs_string(raw));
	cJSON_Delete(raw);
	CU_ASSERT_PTR_NULL(jcs_string(NULL));
	/* Nesting is bounded. */
	cJSON *deep = cJSON_CreateArray(), *cur = deep;
	for (int i = 0; i < JCS_MAX_DEPTH + 5; i++) {
		cJSON *n = cJSON_CreateArray();
		cJSON_AddItemToArray(cur, n);
		cur = n;
	}
	CU_ASSERT_PTR_NULL(jcs_string(deep));
	cJSON_Delete(deep);
	CU_ASSERT_EQUAL(jcs_utf8_valid("\xf0\x9f\x98\x80", 4), 1);
	CU_ASSERT_EQUAL(jcs_utf8_valid("\xf0\x9f\x98", 3), 0);
}

static void test_jcs_cap(void)
{
	cJSON *v = cJSON_Parse("{\"abc\":[1,2,3]}");
	CU_ASSERT_PTR_NOT_NULL_FATAL(v);
	struct buf b;
	buf_init(&b, 8);
	CU_ASSERT_EQUAL(jcs_write(v, &b), -1);
	buf_release(&b);
	buf_init(&b, 15);
	CU_ASSERT_EQUAL(jcs_write(v, &b), 0);
	CU_ASSERT_STRING_EQUAL(b.data, "{\"abc\":[1,2,3]}");
	buf_release(&b);
	/* jcs_write appends. */
	buf_init(&b, 64);
	buf_appends(&b, "x=");
	CU_ASSERT_EQUAL(jcs_write(v, &b), 0);
	CU_ASSERT_STRING_EQUAL(b.data, "x={\"abc\":[1,2,3]}");
	buf_release(&b);
	cJSON_Delete(v);
}

void register_sandbox_jcs_tests(void)
{
	SBX_SUITE("sandbox/jcs", { "key ordering (UTF-16)", test_jcs_ordering },
		  { "whitespace and literals", test_jcs_whitespace_and_literals },
		  { "string escaping", test_jcs_escaping }, { "numbers", test_jcs_numbers },
		  { "refusals", test_jcs_refusals }, { "buffer cap", test_jcs_cap });
}
