/* Guards an HTTP handler the way controller-runtime's secure metrics do
 * (filters.WithAuthenticationAndAuthorization): the request's bearer token is
 * authenticated with a TokenReview, and the user it names is authorized with a
 * SubjectAccessReview for the request's verb (the lower-case HTTP method) on
 * its non-resource path (e.g. get /metrics). Missing or invalid token: 401;
 * not allowed: 403; the API server cannot be asked: 503. An error never lets a
 * request through. The caller needs RBAC create on tokenreviews and
 * subjectaccessreviews. With a cache, the answers for a token, verb and
 * path are remembered for a while (kube/authcache.h). */
#ifndef SBX_KUBE_AUTHFILTER_H
#define SBX_KUBE_AUTHFILTER_H

#include "kube/authcache.h"
#include "kube/client.h"
#include "obs/httpserver.h"

/* Longest bearer token accepted (a ServiceAccount token is ~1 KiB). */
#define KUBE_AUTHFILTER_TOKEN_MAX (16u << 10)

/* The guard's context: all borrowed, must outlive the server. */
struct kube_authfilter {
	struct kube_client *kc;
	obs_http_handler next; /* runs only for an authorized request */
	void *next_ctx;
	struct kube_authcache *cache; /* NULL: every request asks the API server */
};

/* An obs_http_handler; ctx is a struct kube_authfilter. */
void kube_authfilter_serve(void *ctx, const struct obs_http_req *req, struct obs_http_resp *resp);

#endif
