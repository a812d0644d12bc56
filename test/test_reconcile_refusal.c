/* Tests of sbx_pod_refusal_is_final: which API refusals of a pod make a
 * Sandbox Rejected/InvalidSpec for good, and which are Waiting (retried). The
 * bodies are the shapes the API server answers with. */
#include <string.h>

#include "kube/errors.h"
#include "reconcile/reconcile.h"
#include "test_suites.h"

void register_reconcile_refusal_tests(void);

static int final_for(long http, const char *body)
{
	struct kube_error e;
	kube_error_from_response(http, body, strlen(body), NULL, &e);
	return sbx_pod_refusal_is_final(&e);
}

static void test_refusals(void)
{
	/* Field validation of what the spec controls: final. */
	CU_ASSERT_TRUE(final_for(422, "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\","
				      "\"message\":\"Pod \\\"sbx-1\\\" is invalid: spec.containers[0].image: Invalid value\","
				      "\"details\":{\"causes\":[{\"reason\":\"FieldValueInvalid\","
				      "\"field\":\"spec.containers[0].image\"},{\"reason\":\"FieldValueRequired\","
				      "\"field\":\"spec.containers[0].env[3].name\"}]}}"));
	CU_ASSERT_TRUE(final_for(422, "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\",\"message\":\"x\","
				      "\"details\":{\"causes\":[{\"reason\":\"FieldValueInvalid\","
				      "\"field\":\"spec.runtimeClassName\"}]}}"));
	/* A ValidatingAdmissionPolicy's 422: waiting. */
	CU_ASSERT_FALSE(final_for(422, "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\","
				       "\"message\":\"pods \\\"sbx-1\\\" is forbidden: ValidatingAdmissionPolicy 'p' "
				       "with binding 'b' denied request: paused\",\"details\":{\"causes\":[{"
				       "\"message\":\"paused\"}]}}"));
	/* 422 without causes, or causes without fields: waiting. */
	CU_ASSERT_FALSE(final_for(422, "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\",\"message\":\"x\"}"));
	CU_ASSERT_FALSE(final_for(422, "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\",\"message\":\"x\","
				       "\"details\":{\"causes\":[{\"reason\":\"FieldValueInvalid\"}]}}"));
	/* A field the controller's configuration controls: waiting (the operator fixes it). */
	CU_ASSERT_FALSE(final_for(422, "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\",\"message\":\"x\","
				       "\"details\":{\"causes\":[{\"reason\":\"FieldValueInvalid\","
				       "\"field\":\"spec.securityContext.runAsUser\"}]}}"));
	CU_ASSERT_FALSE(final_for(422, "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\",\"message\":\"x\","
				       "\"details\":{\"causes\":[{\"reason\":\"FieldValueForbidden\","
				       "\"field\":\"spec.containers[0].image\"}]}}"));
	CU_ASSERT_FALSE(final_for(422, "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\",\"message\":\"x\","
				       "\"details\":{\"causes\":[{\"reason\":\"FieldValueInvalid\","
				       "\"field\":\"spec.containers[0].imagePullPolicy\"}]}}"));
	/* A webhook's denial (400 or 422 with its message), quota, 5xx: waiting. */
	CU_ASSERT_FALSE(final_for(400, "{\"kind\":\"Status\",\"code\":400,\"reason\":\"BadRequest\","
				       "\"message\":\"admission webhook \\\"x\\\" denied the request: no\"}"));
	CU_ASSERT_FALSE(final_for(422, "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\","
				       "\"message\":\"admission webhook \\\"x\\\" denied the request: no\","
				       "\"details\":{\"causes\":[{\"reason\":\"FieldValueInvalid\","
				       "\"field\":\"spec.containers[0].image\"}]}}"));
	CU_ASSERT_FALSE(final_for(403, "{\"kind\":\"Status\",\"code\":403,\"reason\":\"Forbidden\","
				       "\"message\":\"exceeded quota\"}"));
	CU_ASSERT_FALSE(final_for(500, "{\"kind\":\"Status\",\"code\":500,\"reason\":\"InternalError\","
				       "\"message\":\"failed calling webhook\"}"));
}

static void test_causes_decoded(void)
{
	const char *body = "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\",\"message\":\"x\","
			   "\"details\":{\"causes\":[{\"reason\":\"A\",\"field\":\"f1\"},{\"reason\":\"B\"},{},"
			   "{\"field\":\"f4\"},{\"reason\":\"E\",\"field\":\"f5\"}]}}";
	struct kube_error e;
	kube_error_from_response(422, body, strlen(body), NULL, &e);
	CU_ASSERT_EQUAL(e.ncauses, KUBE_ERROR_CAUSES);
	CU_ASSERT_EQUAL(e.ncauses_total, 5);
	CU_ASSERT_STRING_EQUAL(e.causes[0].reason, "A");
	CU_ASSERT_STRING_EQUAL(e.causes[0].field, "f1");
	CU_ASSERT_STRING_EQUAL(e.causes[1].field, "");
	CU_ASSERT_STRING_EQUAL(e.causes[3].field, "f4");
	/* a refusal with more causes than are kept is never final */
	CU_ASSERT_FALSE(sbx_pod_refusal_is_final(&e));
}

void register_reconcile_refusal_tests(void)
{
	SBX_SUITE("sandbox/refusals (InvalidSpec or Waiting)", { "which refusals are final", test_refusals },
		  { "Status causes decoded", test_causes_decoded });
}
