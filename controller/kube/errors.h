/* Typed Kubernetes API errors (curl's CURLcode habit): every call into the API
 * returns an enum kube_err, and a struct kube_error carries the detail a caller
 * logs or acts on (HTTP status, Status.reason/message, Retry-After). */
#ifndef SBX_KUBE_ERRORS_H
#define SBX_KUBE_ERRORS_H

#include <stddef.h>

#include <cjson/cJSON.h>

enum kube_err {
	KUBE_OK = 0,
	KUBE_ERR_NOT_FOUND,	    /* 404 */
	KUBE_ERR_ALREADY_EXISTS,    /* 409 with reason AlreadyExists */
	KUBE_ERR_CONFLICT,	    /* 409 otherwise (stale resourceVersion) */
	KUBE_ERR_GONE,		    /* 410 Gone/Expired */
	KUBE_ERR_INVALID,	    /* 422 */
	KUBE_ERR_BAD_REQUEST,	    /* 400 */
	KUBE_ERR_TOO_MANY_REQUESTS, /* 429 */
	KUBE_ERR_UNAUTHORIZED,	    /* 401 */
	KUBE_ERR_FORBIDDEN,	    /* 403 */
	KUBE_ERR_SERVER,	    /* 5xx, incl. 504 timeouts */
	KUBE_ERR_TRANSPORT,	    /* connect/TLS/timeout/reset, credentials unavailable */
	KUBE_ERR_DECODE,	    /* undecodable body */
	KUBE_ERR_TOO_LARGE,	    /* response over cap */
	KUBE_ERR_OTHER,
};

#define KUBE_ERROR_CAUSES 4

struct kube_error {
	enum kube_err code;
	long http_status;  /* 0 when no HTTP response was received */
	char reason[64];   /* Status.reason (e.g. "AlreadyExists"), or the conventional one */
	char message[512]; /* Status.message or transport text */
	int retry_after_s; /* from Retry-After or Status.details.retryAfterSeconds, else 0 */
	/* Status.details.causes: the first KUBE_ERROR_CAUSES kept (longer
	 * strings cut), ncauses_total counts them all. */
	int ncauses, ncauses_total;
	struct kube_error_cause {
		char reason[48]; /* e.g. "FieldValueInvalid" */
		char field[128]; /* e.g. "spec.containers[0].image" */
	} causes[KUBE_ERROR_CAUSES];
};

/* Returns a static name for e ("NotFound", "Transport", ...). */
const char *kube_err_str(enum kube_err e);
/* Returns 1 when the same request may succeed later without any change by the
 * caller: SERVER, TRANSPORT, DECODE and TOO_MANY_REQUESTS. CONFLICT, GONE and
 * ALREADY_EXISTS need the caller to re-read first; TOO_LARGE would fail again
 * the same way (the answer itself is too big), so it is not retriable. */
int kube_err_retriable(enum kube_err e);

/* Types a non-2xx answer: the HTTP status decides the code (409 is split into
 * AlreadyExists/Conflict by Status.reason), and a metav1.Status body, when body
 * holds one, fills reason, message and details.retryAfterSeconds. A non-JSON
 * body still yields the code of its HTTP status, with a printable excerpt of
 * the body as message. retry_after_header (NULL ok) is the Retry-After header
 * value, delta-seconds or an HTTP date; it wins over the body's value. Fills
 * every field of *out. */
void kube_error_from_response(long http, const char *body, size_t len,
			      const char *retry_after_header, struct kube_error *out);
/* Types a metav1.Status object such as a watch ERROR event carries (code from
 * Status.code, then Status.reason). Fills every field of *out. */
void kube_error_from_status(const cJSON *status, struct kube_error *out);
/* Fills *out (if non-NULL) with code, http status 0 and a printf message. */
void kube_error_set(struct kube_error *out, enum kube_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
