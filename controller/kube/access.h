/* Asking the API server who someone is and what they may do: TokenReview
 * (authentication.k8s.io/v1) and SubjectAccessReview (authorization.k8s.io/v1),
 * the calls a webhook or an authenticated endpoint makes on behalf of a
 * caller. The caller of these needs RBAC create on tokenreviews /
 * subjectaccessreviews. Knows nothing about sandboxes. */
#ifndef SBX_KUBE_ACCESS_H
#define SBX_KUBE_ACCESS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "kube/client.h"

/* Each review gives up after this long (a webhook calling it has 10 s). */
#define KUBE_ACCESS_TIMEOUT_MS 5000

/* What is asked about. For a resource: ns (NULL for cluster-scoped), verb,
 * group ("" for core), resource, subresource (NULL ok), name (NULL = any).
 * For a non-resource URL: path and verb, everything else NULL. */
struct kube_access_attrs {
	const char *ns;
	const char *verb;
	const char *group;
	const char *resource;
	const char *subresource;
	const char *name;
	const char *path; /* non-resource URL; when set, the resource fields are ignored */
};

/* Asks whether the user described by user_info may do attrs. user_info is a
 * userInfo object as AdmissionReview requests and TokenReview answers carry
 * it: {username, uid, groups: [..], extra: {key: [..]}}. On KUBE_OK,
 * *allowed is 1 or 0 and reason (size reasonlen, may be NULL) holds the
 * authorizer's reason or evaluation error, possibly "". On error *allowed is
 * 0 and err tells why: an error never means "allowed". */
enum kube_err kube_access_review(struct kube_client *c, const cJSON *user_info, const struct kube_access_attrs *attrs,
				 int *allowed, char *reason, size_t reasonlen, struct kube_error *err);

/* Authenticates a bearer token. audiences may be NULL (the API server's
 * default). On KUBE_OK, *user_out is a new userInfo object (caller frees with
 * cJSON_Delete) when the token is valid, or NULL when it is not. On error
 * *user_out is NULL. */
enum kube_err kube_token_review(struct kube_client *c, const char *token, const char *const *audiences,
				cJSON **user_out, struct kube_error *err);

#endif
