/* AdmissionReview v1 (admission.k8s.io/v1) in and out: decoding a request
 * the API server sends to a webhook, and encoding the answer. Pure functions:
 * no I/O, so every decision around them is testable and fuzzable. */
#ifndef SBX_WEBHOOK_ADMISSION_H
#define SBX_WEBHOOK_ADMISSION_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* The largest legitimate Sandbox AdmissionReview, derived from the CRD's
 * limits (crd/sandbox.dev_sandboxes.yaml) and the API server's own:
 *   spec      <= 256 KiB: command, args and env hold at most 32,768
 *             characters together (6 bytes each JSON-escaped at worst: 192
 *             KiB), image 1,024 and runtimeClassName 253 characters, key 255
 *             bytes, 32 resource quantities of <= 253 + 64, lifecycle, and
 *             the JSON syntax of 576 list items;
 *   metadata  <= 640 KiB: the API server's 256 KiB of labels and annotations
 *             (with room for escaping), managedFields naming those keys
 *             again, finalizers, owner references;
 *   status    <= 64 KiB (the controller's own, conditions with messages);
 * one object <= WH_OBJECT_MAX; a review carries the object and, on UPDATE,
 * the old one, plus the request envelope and userInfo (capped below). A
 * body over it is refused (413) before it is read. */
#define WH_OBJECT_MAX (960 * 1024)
#define WH_REVIEW_MAX (2 * WH_OBJECT_MAX + 128 * 1024)
/* Most JSON values in a review: a Sandbox spec has at most ~1,300 (576 list
 * items of a few members, 32 quantities); 256 KiB of the tiniest annotations
 * are ~37,000 pairs, named again in managedFields, in two objects. A review
 * over it is refused (413) before it is parsed: each value costs a cJSON
 * node (64 bytes) and an allocation, so values per byte, not bytes, decide
 * what a body costs to parse (counted by base/jsoncount.h). */
#define WH_REVIEW_MAX_NODES 160000
/* What a parse is charged against the webhook's memory budget: the body,
 * and this per value (node, key and small string allocations). */
#define WH_NODE_COST 128

/* Caps on the identity in request.userInfo that the webhook forwards as a
 * SubjectAccessReview (its size is the caller's choice): */
#define WH_USERNAME_MAX 1024	    /* bytes */
#define WH_GROUPS_MAX 512	    /* entries */
#define WH_EXTRA_KEYS_MAX 64	    /* keys of extra */
#define WH_IDENTITY_BYTES_MAX 65536 /* every string of it together */
/* 0 when user_info is within the caps above; -1 with the cap it passes in
 * why. */
int wh_identity_check(const cJSON *user_info, char *why, size_t whylen);

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
	/* Set by the server, not decoded: the caller presented a client
	 * certificate the webhook's client CA signed (the API server). */
	int authenticated;
};

/* Decodes body[0..len) (at most WH_REVIEW_MAX bytes and WH_REVIEW_MAX_NODES
 * values). Returns 0 and fills
 * *out (release with wh_review_release), or -1 with a message in err; on
 * error *out holds nothing to release. Requires apiVersion
 * admission.k8s.io/v1, kind AdmissionReview, request.uid, request.operation,
 * request.kind.kind and request.userInfo.username as strings. */
int wh_review_decode(const char *body, size_t len, struct wh_review *out, char *err, size_t errlen);
void wh_review_release(struct wh_review *r);

/* What the webhook answers. */
struct wh_verdict {
	int allowed;
	int code;	    /* HTTP-like status for a refusal: 403, 422, 500 */
	const char *reason; /* metav1 StatusReason: Forbidden, Invalid, InternalError */
	char message[1024];
	cJSON *patch;	     /* JSON Patch array (owned) or NULL */
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

/* Quotes a user-supplied string for a message into out: printable ASCII
 * (anything else, '"' and '\\' as \xNN), cut to fit with "...". */
void wh_quote(const char *s, char *out, size_t outlen);

/* Escapes a JSON Pointer token ('~' -> "~0", '/' -> "~1") into out (outlen
 * bytes, >= 2 strlen(tok) + 1). */
void wh_json_pointer_escape(const char *tok, char *out, size_t outlen);

#endif
