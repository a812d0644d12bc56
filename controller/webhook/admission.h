/* AdmissionReview v1 (admission.k8s.io/v1) in and out: decoding a request
 * the API server sends to a webhook, and encoding the answer. Pure functions:
 * no I/O, so every decision around them is testable and fuzzable. */
#ifndef SBX_WEBHOOK_ADMISSION_H
#define SBX_WEBHOOK_ADMISSION_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Largest AdmissionReview accepted (an object and its old version, each at
 * most the API server's 3 MiB request limit in practice far less for a
 * Sandbox: the schema bounds every field). */
#define WH_REVIEW_MAX (3 * 1024 * 1024)

/* A decoded request. Every pointer borrows from root. */
struct wh_review {
	cJSON *root;
	const char *uid;	 /* request.uid, echoed in the answer */
	const char *operation;	 /* CREATE, UPDATE, DELETE, CONNECT */
	const char *group;	 /* request.kind.group ("" for core) */
	const char *kind;	 /* request.kind.kind */
	const char *resource;	 /* request.resource.resource */
	const char *subresource; /* request.subResource or NULL */
	const char *ns;		 /* request.namespace or NULL */
	const char *name;	 /* request.name or NULL (empty with generateName) */
	int dry_run;
	const cJSON *user_info; /* request.userInfo: {username, uid, groups, extra} */
	const char *username;
	const cJSON *object;	 /* request.object or NULL */
	const cJSON *old_object; /* request.oldObject or NULL */
};

/* Decodes body[0..len) (at most WH_REVIEW_MAX bytes). Returns 0 and fills
 * *out (release with wh_review_release), or -1 with a message in err; on
 * error *out holds nothing to release. Requires apiVersion
 * admission.k8s.io/v1, kind AdmissionReview, request.uid, request.operation,
 * request.kind.kind and request.userInfo.username as strings. */
int wh_review_decode(const char *body, size_t len, struct wh_review *out, char *err, size_t errlen);
void wh_review_release(struct wh_review *r);

/* What the webhook answers. */
struct wh_verdict {
	int allowed;
	int code;	   /* HTTP-like status for a refusal: 403, 422, 500 */
	const char *reason; /* metav1 StatusReason: Forbidden, Invalid, InternalError */
	char message[1024];
	cJSON *patch; /* JSON Patch array (owned) or NULL */
	const char *outcome; /* short label for metrics: allowed, mutated, denied, error */
};

/* Fills v as "allowed, nothing to change". */
void wh_verdict_allow(struct wh_verdict *v);
/* Fills v as a refusal with a printf message (v need not be initialised;
 * it must not hold a patch). */
void wh_verdict_deny(struct wh_verdict *v, int code, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void wh_verdict_release(struct wh_verdict *v);

/* Returns the AdmissionReview answer for request uid (caller frees). */
char *wh_response_encode(const char *uid, const struct wh_verdict *v);

/* Escapes a JSON Pointer token ('~' -> "~0", '/' -> "~1") into out (outlen
 * bytes, >= 2 strlen(tok) + 1). */
void wh_json_pointer_escape(const char *tok, char *out, size_t outlen);

#endif
